import { useState } from 'react';
import { ApiError, messageOf } from '../api/problem';

/**
 * Errors of a submitted form, split as the api reports them: per field
 * (problem `errors`, shown next to the field) and the rest (shown above the
 * buttons). `fieldOf` maps an api field name to the form's field, or
 * undefined when the form has none for it.
 */
export function useFormErrors(fieldOf: (apiField: string) => string | undefined = (f) => f) {
  const [fields, setFields] = useState<Record<string, string>>({});
  const [general, setGeneral] = useState<string[]>([]);
  return {
    fields,
    general,
    clear() {
      setFields({});
      setGeneral([]);
    },
    show(error: unknown) {
      const byField: Record<string, string> = {};
      const rest: string[] = [];
      if (error instanceof ApiError && error.problem.errors?.length) {
        for (const [apiField, message] of Object.entries(error.fieldErrors())) {
          const field = fieldOf(apiField);
          if (field) byField[field] = byField[field] ? `${byField[field]}; ${message}` : message;
          else rest.push(`${apiField} ${message}`);
        }
        if (Object.keys(byField).length === 0 && rest.length === 0) rest.push(messageOf(error));
      } else {
        rest.push(messageOf(error));
      }
      setFields(byField);
      setGeneral(rest);
    },
  };
}
