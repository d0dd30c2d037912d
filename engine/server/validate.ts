// Checks of untrusted request params. Each failure is a JSON-RPC InvalidParams error whose
// message names the method, the field and what was received.
import { ErrorCodes, ResponseError } from 'vscode-languageserver';

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)}`;
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value)}`;
}

export function invalidParams(method: string, message: string): ResponseError<void> {
  return new ResponseError(ErrorCodes.InvalidParams, `${method}: ${message}`);
}

export function requireObject(method: string, params: unknown, what = 'params'): Record<string, unknown> {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) {
    throw invalidParams(method, `${what} must be an object, got ${describe(params)}`);
  }
  return params as Record<string, unknown>;
}

export function requireString(method: string, obj: Record<string, unknown>, field: string, what = `params.${field}`): string {
  const value = obj[field];
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidParams(method, `${what} must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

export function optionalInteger(method: string, obj: Record<string, unknown>, field: string, min: number, max: number,
  what = `params.${field}`): number | undefined {
  const value = obj[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw invalidParams(method, `${what} must be an integer in [${min}, ${max}], got ${describe(value)}`);
  }
  return value;
}

export function requireInteger(method: string, obj: Record<string, unknown>, field: string, min: number, max: number,
  what = `params.${field}`): number {
  const value = optionalInteger(method, obj, field, min, max, what);
  if (value === undefined) throw invalidParams(method, `${what} is required (an integer in [${min}, ${max}])`);
  return value;
}
