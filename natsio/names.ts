/**
 * Subject and stream-name rules of the NATS layer (docs/cluster.md "Streams and subjects"), checked before a
 * name reaches the server so that a bad name is a clear error with a stable code, never a
 * server-side refusal halfway through a setup:
 *
 * - a subject root (`cluster.subject_root`, the first token of every cluster subject): 1–32 of
 *   `[a-z0-9_-]`, a letter first; refused with `JcpError` `schema` (the code the node config and
 *   the CLI always reported);
 * - a subject: dot-separated non-empty tokens of printable ASCII without spaces; `*` and `>` only
 *   as whole tokens of a filter, `>` last; refused with {@link NatsNameError} `nats-bad-subject`;
 * - a stream or bucket name: 1–255 bytes of printable ASCII without spaces, `.`, `*`, `>`, `/` or
 *   `\`; refused with {@link NatsNameError} `nats-bad-stream-name`.
 */
import { ErrorCodes, JcpError } from '../core/index.ts';
import { NatsNameCodes, NatsNameError } from './errors.ts';

const ROOT_RE = /^[a-z][a-z0-9_-]{0,31}$/;
/** Printable ASCII without space. */
const TOKEN_RE = /^[\x21-\x7e]+$/;

/**
 * `root` when it is a valid subject root (1–32 of `[a-z0-9_-]`, a letter first).
 * @throws JcpError `schema` otherwise.
 */
export function checkSubjectRoot(root: string): string {
  if (typeof root !== 'string' || !ROOT_RE.test(root)) {
    throw new JcpError(ErrorCodes.SCHEMA, `subject root ${JSON.stringify(root)}: expected 1-32 of [a-z0-9_-], a letter first`);
  }
  return root;
}

/**
 * The stream name of subject root `root` with `suffix`: upper case, `-` as `_`
 * (`jcp`, `STATEMENTS` → `JCP_STATEMENTS`). @throws JcpError `schema` for a bad root.
 */
export function rootStreamName(root: string, suffix: string): string {
  return checkStreamName(`${checkSubjectRoot(root).toUpperCase().replaceAll('-', '_')}_${suffix}`);
}

/**
 * `subject` when NATS accepts it for publishing (`wildcards: false`, the default) or as a
 * subscription filter (`wildcards: true`: `*` for one token, `>` for the rest, as last token).
 * @throws NatsNameError `nats-bad-subject` otherwise.
 */
export function checkSubject(subject: string, opts: { wildcards?: boolean } = {}): string {
  const bad = (why: string) => new NatsNameError(NatsNameCodes.SUBJECT, String(subject), why);
  if (typeof subject !== 'string' || subject.length === 0) throw bad('empty');
  const tokens = subject.split('.');
  tokens.forEach((t, i) => {
    if (t.length === 0) throw bad(`token ${i + 1} is empty`);
    if (!TOKEN_RE.test(t)) throw bad(`token ${i + 1} has a space or a non-printable character`);
    const wild = t === '*' || t === '>';
    if (!wild && (t.includes('*') || t.includes('>'))) throw bad(`token ${i + 1}: a wildcard must be a whole token`);
    if (wild && !opts.wildcards) throw bad('wildcards are only allowed in a filter');
    if (t === '>' && i !== tokens.length - 1) throw bad("'>' must be the last token");
  });
  return subject;
}

/**
 * `name` when JetStream accepts it as a stream or KV bucket name.
 * @throws NatsNameError `nats-bad-stream-name` otherwise.
 */
export function checkStreamName(name: string): string {
  const bad = (why: string) => new NatsNameError(NatsNameCodes.STREAM_NAME, String(name), why);
  if (typeof name !== 'string' || name.length === 0) throw bad('empty');
  if (Buffer.byteLength(name) > 255) throw bad('longer than 255 bytes');
  if (!TOKEN_RE.test(name)) throw bad('has a space or a non-printable character');
  if (/[.*>/\\]/.test(name)) throw bad('has one of . * > / \\');
  return name;
}

/**
 * A stream or bucket name derived from a subject prefix (`jcp.frost` → `jcp_frost`): every
 * character outside `[A-Za-z0-9_-]` becomes `_`. @throws NatsNameError `nats-bad-stream-name`
 * when the result is empty or too long.
 */
export function storeNameOf(prefix: string): string {
  return checkStreamName(prefix.replace(/[^A-Za-z0-9_-]/g, '_'));
}
