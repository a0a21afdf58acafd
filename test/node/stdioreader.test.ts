/**
 * The node's stdio line reader (node/stdioreader.ts), in place of the MCP SDK's `ReadBuffer`: the
 * same messages as the SDK's for lines within the cap, however the bytes are cut; a line past the
 * cap capped per line, not per buffer, and kept as a head and a tail only; a response past it
 * replaced by an error for its top-level id (TypeScript and Python key orders), never for an id
 * nested in the result or for a server's own request; otherwise the SDK's error.
 */
import { deserializeMessage, type JSONRPCMessage, ReadBuffer } from '@modelcontextprotocol/client';
import { describe, expect, test } from 'vitest';
import { OVERSIZED_ERROR_CODE, oversizedResponseId, StdioReader } from '../../node/index.ts';

const CAP = 4096;

/** A reader with the cap {@link CAP} (`spare` as given) and the oversized lines it reported. */
function reader(spare = true) {
  const seen: { id: number | string; bytes: number }[] = [];
  const r = new StdioReader({ capBytes: CAP, parse: deserializeMessage, onOversized: (l) => seen.push({ id: l.id, bytes: l.bytes }) });
  r.spare = spare;
  return { r, seen };
}

/** Feeds `text` to `r` in chunks of `size` bytes; every message read after each chunk. */
function feed(r: { append(b: Buffer): void; readMessage(): JSONRPCMessage | null }, text: string, size: number): JSONRPCMessage[] {
  const bytes = Buffer.from(text);
  const out: JSONRPCMessage[] = [];
  for (let i = 0; i < bytes.length; i += size) {
    r.append(bytes.subarray(i, i + size));
    for (let m = r.readMessage(); m !== null; m = r.readMessage()) out.push(m);
  }
  return out;
}

/** A TypeScript-SDK response line (`{result, jsonrpc, id}`) whose text makes it `bytes` long or so. */
const tsLine = (id: number | string, text: string) =>
  `${JSON.stringify({ result: { content: [{ type: 'text', text }] }, jsonrpc: '2.0', id })}\n`;
/** A Python-SDK response line (`{jsonrpc, id, result}`). */
const pyLine = (id: number | string, text: string) =>
  `${JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text }] } })}\n`;
const errorOf = (m: JSONRPCMessage | null | undefined) =>
  (m as { id?: unknown; error?: { code: number; message: string } } | undefined) ?? {};

describe('StdioReader', () => {
  test('the same messages as the SDK reader for lines within the cap, whatever the chunk size (CRLF, blank and non-JSON lines skipped)', () => {
    const text = [
      tsLine(1, 'héllo wörld ✓'),
      '\n',
      'not json at all\n',
      `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: 1 } })}\r\n`,
      pyLine('abc', 'x'.repeat(CAP - 200)),
      tsLine(3, '"quoted", \\ and \n newline'),
    ].join('');
    for (const size of [1, 2, 3, 7, 64, 1000, 100_000]) {
      const sdk = new ReadBuffer({ maxBufferSize: 100 * CAP });
      expect(feed(reader().r, text, size)).toEqual(feed(sdk, text, size));
    }
    expect(feed(reader().r, text, 5)).toHaveLength(4);
  });

  test('a JSON line that is not JSON-RPC throws the schema error once, and is dropped (the next line reads)', () => {
    const { r } = reader();
    r.append(Buffer.from(`{"hello":1}\n${tsLine(2, 'ok')}`));
    expect(() => r.readMessage()).toThrow();
    expect(errorOf(r.readMessage()).id).toBe(2);
    expect(r.readMessage()).toBeNull();
  });

  test('the cap is per line: many lines within it in one chunk pass, though the chunk is past it', () => {
    const lines = Array.from({ length: 10 }, (_, i) => tsLine(i, 'y'.repeat(CAP - 100))).join('');
    expect(Buffer.byteLength(lines)).toBeGreaterThan(5 * CAP);
    expect(feed(reader(false).r, lines, lines.length)).toHaveLength(10);
  });

  test('before `spare`: a line past the cap throws the SDK error as soon as it is past it, and nothing is read until clear()', () => {
    const { r } = reader(false);
    r.append(Buffer.from('{"result":"'));
    expect(() => r.append(Buffer.alloc(CAP, 0x61))).toThrow(`ReadBuffer exceeded maximum size of ${CAP} bytes`);
    r.append(Buffer.from(`"}\n${tsLine(1, 'late')}`));
    expect(r.readMessage()).toBeNull();
    r.clear();
    r.append(Buffer.from(tsLine(2, 'after')));
    expect(errorOf(r.readMessage()).id).toBe(2);
  });

  for (const [order, line] of [
    ['TypeScript SDK {result, jsonrpc, id}', tsLine],
    ['Python SDK {jsonrpc, id, result}', pyLine],
  ] as const) {
    for (const id of [7, 'req-7']) {
      test(`a response past the cap (${order}, id ${JSON.stringify(id)}): an error for its id; the lines around it read; any chunk size`, () => {
        for (const size of [1, 13, 512, 4096, 65_536]) {
          const { r, seen } = reader();
          const big = line(id, 'z'.repeat(3 * CAP));
          const msgs = feed(r, tsLine(1, 'before') + big + tsLine(2, 'after'), size);
          expect(msgs.map((m) => errorOf(m).id)).toEqual([1, id, 2]);
          expect(errorOf(msgs[1]).error).toEqual({
            code: OVERSIZED_ERROR_CODE,
            message: `result larger than the stdio read cap of ${CAP} bytes (${Buffer.byteLength(big) - 1} bytes); not read`,
          });
          expect(seen).toEqual([{ id, bytes: Buffer.byteLength(big) - 1 }]);
        }
      });
    }
  }

  test('a line past the cap with no response id to be sure of: the SDK error at its end (the stream is given up)', () => {
    const pad = 'w'.repeat(2 * CAP);
    for (const text of [
      // a request or notification from the server (its ids are another id space)
      `${JSON.stringify({ method: 'sampling/createMessage', params: { pad }, jsonrpc: '2.0', id: 3 })}\n`,
      `${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: pad } })}\n`,
      // an id only inside the result
      `${JSON.stringify({ result: { content: [{ type: 'text', text: pad }], inner: { jsonrpc: '2.0', id: 9 } } })}\n`,
      // no jsonrpc member, two ids, not JSON
      `${JSON.stringify({ result: pad, id: 4 })}\n`,
      `{"jsonrpc":"2.0","id":1,"result":"${pad}","id":2}\n`,
      `${pad}\n`,
    ]) {
      const { r, seen } = reader();
      expect(() => feed(r, text, 1000)).toThrow(`ReadBuffer exceeded maximum size of ${CAP} bytes`);
      expect(seen).toEqual([]);
    }
  });

  test('an id nested in the result is never taken for the top-level one', () => {
    const tail = (s: string) => [`{"result":`, s] as const;
    // The result's text ends like a response: escaped inside the string, so not read as members.
    expect(oversizedResponseId(...tail(`"x\\",\\"jsonrpc\\":\\"2.0\\",\\"id\\":9}"},"jsonrpc":"2.0","id":5}`))).toBe(5);
    expect(oversizedResponseId(...tail(`"x\\",\\"jsonrpc\\":\\"2.0\\",\\"id\\":9}"}}`))).toBeUndefined();
    // A nested object ending the result with its own id and jsonrpc.
    expect(oversizedResponseId(...tail(`{"jsonrpc":"2.0","id":9}},"jsonrpc":"2.0","id":5}`))).toBe(5);
    expect(oversizedResponseId(...tail(`{"jsonrpc":"2.0","id":9}}}`))).toBeUndefined();
    // A string value ending with a comma just before a member.
    expect(oversizedResponseId(...tail(`"abc,","jsonrpc":"2.0","id":"q"}`))).toBe('q');
    // Numbers that only end in digits are not ids.
    expect(oversizedResponseId(...tail(`1,"jsonrpc":"2.0","id":1.5}`))).toBeUndefined();
    expect(oversizedResponseId(...tail(`1,"jsonrpc":"2.0","id":1e5}`))).toBeUndefined();
    // The head: only jsonrpc/id members before the result, and not an id in the result.
    expect(oversizedResponseId('{"jsonrpc":"2.0","result":{"id":3,', '')).toBeUndefined();
    expect(oversizedResponseId('{"jsonrpc":"2.0","method":"x","id":3,"result":', '"}')).toBeUndefined();
    expect(oversizedResponseId('{"id":3,"jsonrpc":"2.0","error":{"code":1,', 'x"}}')).toBe(3);
  });

  test('memory stays bounded while a line far past the cap streams in', () => {
    const { r, seen } = reader();
    const chunk = Buffer.alloc(65_536, 0x62);
    r.append(Buffer.from('{"result":"'));
    const before = process.memoryUsage().arrayBuffers;
    let peak = before;
    for (let i = 0; i < 3200; i++) {
      // 200 MiB in all
      r.append(chunk);
      if (i % 100 === 0) peak = Math.max(peak, process.memoryUsage().arrayBuffers);
    }
    expect(peak - before).toBeLessThan(8 * 1024 * 1024);
    r.append(Buffer.from('","jsonrpc":"2.0","id":11}\n'));
    expect(errorOf(r.readMessage()).id).toBe(11);
    expect(seen[0]!.bytes).toBe(11 + 3200 * 65_536 + 26);
  });
});
