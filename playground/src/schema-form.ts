// The form an input request's `response_schema` (a JSON Schema) describes, and the answer its
// fields make (docs/adr/0066). The page only shapes the answer: whether it fits the schema
// (a minimum, a pattern...) the server checks, and says why not (ADR 0064).

/** How one value is typed in. */
export type FieldKind = 'text' | 'number' | 'integer' | 'boolean' | 'choice' | 'json';

export type Field = {
  /** The property it fills; undefined when the whole answer is this one value. */
  name: string | undefined;
  label: string;
  kind: FieldKind;
  required: boolean;
  /** For `choice`: the schema's `enum`, in order. */
  choices: unknown[];
  description: string | undefined;
};

/** The fields, and whether the answer is an object of them or the one field's value. */
export type Form = { fields: Field[]; object: boolean };

/** What the user typed, by field key (`fieldKey`): text, a choice's index, or a checkbox. */
export type Values = Record<string, string | boolean>;

type Schema = Record<string, unknown>;

function isSchema(value: unknown): value is Schema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The schema's `type`, the first that is not "null" when it lists several. */
function typeOf(schema: Schema): unknown {
  const { type } = schema;
  return Array.isArray(type) ? type.find(t => t !== 'null') : type;
}

function kindOf(schema: unknown): FieldKind {
  if (!isSchema(schema)) return 'text'; // no schema: any answer, typed as text
  if (Array.isArray(schema.enum)) return 'choice';
  const type = typeOf(schema);
  if (type === 'string' || type === 'number' || type === 'integer' || type === 'boolean') {
    return type === 'string' ? 'text' : type;
  }
  if (type === undefined && Object.keys(schema).length === 0) return 'text'; // `{}`: anything
  return 'json'; // arrays, nested objects, schemas the page has no field for
}

function fieldOf(schema: unknown, name: string | undefined, label: string, required: boolean): Field {
  const own = isSchema(schema) ? schema : {};
  return {
    name,
    label: typeof own.title === 'string' ? own.title : label,
    kind: kindOf(schema),
    required,
    choices: Array.isArray(own.enum) ? own.enum : [],
    description: typeof own.description === 'string' ? own.description : undefined,
  };
}

/** The form a `response_schema` describes: an object's properties, one field each; any other
 * schema, one field for the whole answer; no schema, one text field. */
export function formOf(schema: unknown, message: string): Form {
  if (isSchema(schema) && typeOf(schema) === 'object' && isSchema(schema.properties)) {
    const required = new Set(Array.isArray(schema.required) ? schema.required : []);
    const fields = Object.entries(schema.properties).map(([name, property]) =>
      fieldOf(property, name, name, required.has(name)),
    );
    return { fields, object: true };
  }
  return { fields: [fieldOf(schema, undefined, message, true)], object: false };
}

/** The key of a field's value in `Values`. */
export function fieldKey(field: Field): string {
  return field.name ?? '';
}

/** One field's value as the answer holds it; `undefined` when left empty. */
function valueOf(field: Field, raw: string | boolean | undefined): unknown {
  switch (field.kind) {
    case 'boolean':
      return raw === true;
    case 'choice':
      return raw === undefined || raw === '' ? undefined : field.choices[Number(raw)];
    case 'number':
    case 'integer':
      // A number field gives '' or a number's text; the schema's own rules are the server's.
      return raw === undefined || raw === '' ? undefined : Number(raw);
    case 'json':
      return raw === undefined || raw === '' ? undefined : JSON.parse(String(raw));
    default:
      return raw ?? '';
  }
}

/** The answer the form's values make (the `output` of `addToolOutput`), or why there is none
 * yet: a JSON field that does not parse, or nothing typed where the answer is one value. A
 * property left empty is left out: if the schema requires it, the server says so. */
export function answerOf(form: Form, values: Values): { output: unknown } | { problem: string } {
  const entries: [string, unknown][] = [];
  for (const field of form.fields) {
    let value: unknown;
    try {
      value = valueOf(field, values[fieldKey(field)]);
    } catch {
      return { problem: `${field.label}: not valid JSON.` };
    }
    if (value === undefined) {
      if (!form.object) return { problem: 'Type an answer first.' };
      continue;
    }
    if (!form.object) return { output: value };
    entries.push([fieldKey(field), value]);
  }
  return { output: Object.fromEntries(entries) };
}
