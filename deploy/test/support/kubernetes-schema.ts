/**
 * Strict, offline validation of rendered Kubernetes manifests against the API's own
 * schemas, the way the API server's strict field validation judges them:
 *
 * - kubernetes-models ships the Kubernetes OpenAPI definitions compiled by ajv: types,
 *   formats, enums and required fields of every built-in kind.
 * - Those compiled schemas let unknown fields through (the OpenAPI document has no
 *   `additionalProperties: false`), so unknown fields are checked with a JSON Schema
 *   built from @kubernetes/client-node's generated models (their attribute maps list
 *   every field of every definition) and compiled with ajv.
 */
import * as k8s from '@kubernetes/client-node';
import { Ajv, type ValidateFunction } from 'ajv';

export interface ManifestProblem {
  resource: string;
  path: string;
  message: string;
}

interface Attribute {
  baseName: string;
  type: string;
}
interface Model {
  getAttributeTypeMap(): Attribute[];
}

const models = k8s as unknown as Record<string, Model | undefined>;
const ARRAY = /^Array<(.+)>$/;
const MAP = /^\{ \[key: string\]: (.+); \}$/;

function isModel(name: string): boolean {
  return typeof models[name]?.getAttributeTypeMap === 'function';
}

/** A JSON Schema with additionalProperties: false for `name` and every model it reaches. */
function strictSchemas(root: string): Record<string, object> {
  const defs: Record<string, object> = {};
  const typeSchema = (type: string): object => {
    const array = ARRAY.exec(type);
    if (array) return { type: 'array', items: typeSchema(array[1]!) };
    const map = MAP.exec(type);
    if (map) return { type: 'object', additionalProperties: typeSchema(map[1]!) };
    if (isModel(type)) {
      visit(type);
      return { $ref: `#/$defs/${type}` };
    }
    return {}; // scalars, IntOrString, quantities: typed by kubernetes-models
  };
  const visit = (name: string): void => {
    if (defs[name]) return;
    defs[name] = {}; // placeholder against cycles (JSONSchemaProps)
    const properties: Record<string, object> = {};
    for (const attr of models[name]!.getAttributeTypeMap()) properties[attr.baseName] = typeSchema(attr.type);
    defs[name] = { type: 'object', properties, additionalProperties: false };
  };
  visit(root);
  return defs;
}

const ajv = new Ajv({ allErrors: true, strict: true });
const strictValidators = new Map<string, ValidateFunction>();

function strictValidator(model: string): ValidateFunction {
  let validate = strictValidators.get(model);
  if (!validate) {
    validate = ajv.compile({ $ref: `#/$defs/${model}`, $defs: strictSchemas(model) });
    strictValidators.set(model, validate);
  }
  return validate;
}

interface ValidationError {
  instancePath: string;
  message?: string;
  params?: Record<string, unknown>;
}

/** kubernetes-models' module for an apiVersion/kind: core is "v1", groups "apps/v1". */
async function modelsValidator(apiVersion: string, kind: string): Promise<(data: unknown) => ValidationError[]> {
  const mod = (await import(`kubernetes-models/${apiVersion}/${kind}`)) as Record<string, unknown>;
  const Ctor = mod[kind] as (new (data: unknown) => { validate(): void }) | undefined;
  if (!Ctor) throw new Error(`kubernetes-models has no ${apiVersion} ${kind}`);
  return (data) => {
    try {
      new Ctor(data).validate();
      return [];
    } catch (err) {
      const errors = (err as { errors?: ValidationError[] }).errors;
      return errors ?? [{ instancePath: '', message: (err as Error).message }];
    }
  };
}

/** client-node's model name: apps/v1 Deployment → V1Deployment, autoscaling/v2 HPA → V2…. */
function modelName(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop()!;
  return version.charAt(0).toUpperCase() + version.slice(1) + kind;
}

/**
 * kustomize writes long Secret data as wrapped base64 (a YAML block scalar); the API
 * server's base64 decoder skips line breaks, so they are dropped before the "byte"
 * format check.
 */
function apiServerView<T extends { kind?: unknown }>(doc: T): T {
  const data = (doc as { data?: unknown }).data;
  if (doc.kind !== 'Secret' || !data || typeof data !== 'object') return doc;
  const unwrapped = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, typeof v === 'string' ? v.replace(/[\r\n]/g, '') : v]));
  return { ...doc, data: unwrapped };
}

/** Every problem in one rendered object; empty when the API server would accept it strictly. */
export async function validateManifest(doc: { apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown } }): Promise<ManifestProblem[]> {
  const resource = `${String(doc.kind)}/${String(doc.metadata?.name)}`;
  if (typeof doc.apiVersion !== 'string' || typeof doc.kind !== 'string') {
    return [{ resource, path: '', message: 'apiVersion and kind are required' }];
  }
  const model = modelName(doc.apiVersion, doc.kind);
  if (!isModel(model)) return [{ resource, path: '', message: `unknown kind ${doc.apiVersion} ${doc.kind}` }];
  const problems: ManifestProblem[] = [];
  for (const e of (await modelsValidator(doc.apiVersion, doc.kind))(apiServerView(doc))) {
    problems.push({ resource, path: e.instancePath || '/', message: `${e.message ?? 'invalid'} ${JSON.stringify(e.params ?? {})}` });
  }
  const strict = strictValidator(model);
  if (!strict(doc)) {
    for (const e of strict.errors ?? []) {
      const extra = e.keyword === 'additionalProperties' ? ` "${String(e.params.additionalProperty)}"` : '';
      problems.push({ resource, path: e.instancePath || '/', message: `${e.message ?? 'invalid'}${extra}` });
    }
  }
  return problems;
}
