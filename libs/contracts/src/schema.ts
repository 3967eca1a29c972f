import { Type, type SchemaOptions, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';

/**
 * A closed set of strings as a plain JSON Schema `enum`. TypeBox's own unions write `anyOf` of
 * `const`s; the wire schemas have always used `enum`, and an `enum` names every allowed value in
 * ajv's error, which the rejection messages rely on.
 */
export function StringEnum<const T extends readonly string[]>(values: T, options: SchemaOptions = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ ...options, enum: [...values] });
}

/** Any JSON object, checked no further here (its fields are checked by a schema of their own). */
export function AnyObject<T extends object = Record<string, unknown>>(options: SchemaOptions = {}): TUnsafe<T> {
  return Type.Unsafe<T>({ ...options, type: 'object' });
}

/** The schema as plain JSON: TypeBox's symbol keys dropped, so it can be embedded in documents and compared. */
export function plainSchema<T>(schema: T): T {
  return JSON.parse(JSON.stringify(schema)) as T;
}

/**
 * A named schema used inside another, without its `$id`: the validator registers each `$id` once,
 * and a document embedding the same schema twice would otherwise name two resources alike.
 */
export function Embedded<T extends TSchema>(schema: T): TUnsafe<Static<T>> {
  const plain = plainSchema(schema) as Record<string, unknown>;
  delete plain.$id;
  return Type.Unsafe<Static<T>>(plain);
}
