/**
 * The peer address that abuse limits count by, shared by the jcp/1 server (node/server.ts) and the
 * HTTP listeners' connection bounds (io/httplimits.ts).
 */

/**
 * The peer address that abuse limits, per-address fairness and eviction count by (one bucket,
 * one share of the connections): an IPv4 address as it is, an IPv4-mapped IPv6 address
 * (`::ffff:192.0.2.1`, a dual-stack listener) as its IPv4 form, and any other IPv6 address as
 * its /64 prefix (`2001:db8:1:2::/64`): one host is usually given a whole /64, so counting by
 * full address would give it 2^64 buckets. `''` when the socket has no address (closed).
 */
export function peerAddress(remote: string | undefined): string {
  if (remote === undefined || remote === '') return '';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(remote);
  if (mapped !== null) return mapped[1]!;
  if (!remote.includes(':')) return remote;
  const addr = remote.split('%')[0]!.toLowerCase();
  const [front = '', back] = addr.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ['0', '0'] : [g])));
  const head = groups(front);
  const tail = back === undefined ? [] : groups(back);
  const all = [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  return `${all
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
