import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

/**
 * The document's named schemas (`#/components/schemas/…`) and references to
 * them. A schema is named where it is declared; a reference is typed as the
 * schema it points to, so `Wire<typeof schema>` follows references (ADR 0012).
 */
const names = new WeakMap<object, string>();
const registry = new Map<string, object>();

/** Declares `schema` as the component `name`; the document lists every named schema. */
export function named<S extends object>(name: string, schema: S): S {
  if (registry.has(name)) throw new Error(`component ${name} is named twice`);
  names.set(schema, name);
  registry.set(name, schema);
  return schema;
}

/** Every named schema, by name. */
export function components(): Record<string, object> {
  return Object.fromEntries(registry);
}

export function componentName(schema: object): string | undefined {
  return names.get(schema);
}

/**
 * A reference to a named schema, with sibling keywords (a description). At run
 * time it is the `$ref`; its type is the schema's, so wire types see through it.
 */
export function ref<S extends object>(schema: S, siblings: { description?: string } = {}): S {
  const name = names.get(schema);
  if (name === undefined) throw new Error('ref() of a schema that was not named');
  return { $ref: `#/components/schemas/${name}`, ...siblings } as unknown as S;
}

/** The value a response (or body) schema describes, as the presenters build it. */
export type Wire<S extends JSONSchema> = FromSchema<S>;

/** JSON content: a named schema by reference, any other inline. */
export function json(schema: object): { 'application/json': { schema: object } } {
  return { 'application/json': { schema: names.has(schema) ? ref(schema) : schema } };
}
