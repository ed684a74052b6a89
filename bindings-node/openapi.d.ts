// Type declarations of harness-sdk/openapi: what generated typed clients (`harness codegen
// --lang typescript`) share. Only `OperationOptions` and `Service` are for callers; the rest is
// what the generated code calls.

import type { Client, Pairs, Response } from './index'

/** Options of one typed call, beside its parameters. */
export interface OperationOptions {
  /** Aborting it cancels the call in Rust (freeing its permits); the promise rejects with `CancelledError`. */
  signal?: AbortSignal
  /** Overrides the service's total timeout (`timeouts.request_ms`), in milliseconds. */
  timeoutMs?: number
  /** The caller's W3C `traceparent`, continued downstream. */
  traceparent?: string
  /** Who the call is made for (the audit record only). */
  principal?: string
}

/** The version of what generated code calls here; a generated client checks it at load. */
export declare const CONTRACT: number

/** Reads a JSON value at a JSON pointer (for messages) into a typed value. */
export type Read<T> = (value: unknown, at: string) => T

/** One operation's request, as a generated method builds it. */
export interface Call {
  method: string
  path: string
  /** The endpoint label: the operation's operationId. */
  endpoint: string
  query: Array<[string, string]>
  headers: Array<[string, string]>
  /** The typed JSON body, written by `stringify`. */
  json?: unknown
  idempotencyKey?: string
}

/** A declared error response: its class, and the reader of its body (null when it is not JSON). */
export type ErrorEntry = readonly [new (message: string, fields?: object) => Error, Read<unknown> | null]

/** Calls one service's operations through a harness-sdk `Client`; generated client classes extend it. */
export declare class Service {
  constructor(client: Client, service: string)
  protected _send<T>(call: Call, options: OperationOptions | undefined, decode: (res: Response) => T, errors: Record<string, ErrorEntry>): Promise<T>
}

/** JSON text as values; integers past 2^53 are BigInts. @throws SyntaxError */
export declare function parse(text: string): unknown
/** A typed value as JSON text (bigints as integers, Dates as RFC 3339, bytes as base64). @throws ConfigError */
export declare function stringify(value: unknown, where?: string): string
/** A parameter value as text. */
export declare function text(value: unknown): string
export declare function path(value: unknown, name: string): string
export declare function query(out: Array<[string, string]>, name: string, value: unknown, sep: string | null): void
export declare function header(out: Array<[string, string]>, name: string, value: unknown): void
export declare function body(res: Response): unknown

export declare const string: Read<string>
export declare const integer: Read<number>
export declare const int64: Read<bigint>
export declare const number: Read<number>
export declare const boolean: Read<boolean>
export declare const any: Read<unknown>
export declare const dateTime: Read<Date>
export declare const date: Read<string>
export declare const uuid: Read<string>
export declare const bytes: Read<Uint8Array>
export declare function literal<T>(values: readonly T[]): Read<T>
export declare function arrayOf<T>(item: Read<T>): Read<T[]>
export declare function mapOf<T>(value: Read<T>): Read<Record<string, T>>
export declare function nullable<T>(read: Read<T>): Read<T | null>
export declare function oneOf(readers: ReadonlyArray<Read<unknown>>, expected: string): Read<unknown>

export type { Pairs }
