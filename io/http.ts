/**
 * The read-only HTTP guard shared by the audit console (console/server.ts) and the node's metrics
 * port (node/metrics.ts): GET and HEAD only, and a `Host` that names loopback or the listening
 * address (DNS rebinding: a loopback binding alone lets a web page read the port through a name
 * of its own; RFC 9110 §7.2, §15.5.20 for 421).
 */

/** The host name of a `Host` header (`name[:port]`, `[v6]:port`), lower case; '' when malformed. */
export function hostName(h: string): string {
  const m = /^(\[[^\]]*\]|[^:]*)(?::[0-9]*)?$/.exec(h.trim().toLowerCase());
  return m === null ? '' : m[1]!;
}

/** Why a read-only request is refused: its status and a one-line reason. */
export interface ReadOnlyRefusal {
  /** 405 (a method other than GET/HEAD) or 421 (a foreign `Host`). */
  readonly status: 405 | 421;
  readonly why: 'method' | 'host';
}

/**
 * A check for a read-only HTTP server listening on `listenHost`: 405 for any method but GET and
 * HEAD, then 421 for a `Host` naming neither loopback (`127.0.0.1`, `localhost`, `[::1]`) nor
 * `listenHost`; a wildcard listener (`0.0.0.0`, `::`) accepts any `Host`. Undefined = serve it.
 */
export function readOnlyGuard(listenHost: string): (method: string | undefined, host: string | undefined) => ReadOnlyRefusal | undefined {
  const wildcard = listenHost === '0.0.0.0' || listenHost === '::' || listenHost === '[::]';
  const l = listenHost.toLowerCase();
  const names = new Set(['127.0.0.1', 'localhost', '[::1]', l, `[${l}]`]);
  return (method, host) => {
    if (method !== 'GET' && method !== 'HEAD') return { status: 405, why: 'method' };
    if (!wildcard && !names.has(hostName(host ?? ''))) return { status: 421, why: 'host' };
    return undefined;
  };
}
