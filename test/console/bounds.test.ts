/**
 * The audit console bounds its connections (console/server.ts serveConsole over
 * io/httplimits.ts): one connection over the per-peer bound is closed at once while another
 * loopback address is still served.
 */
import { describe, expect, test } from 'vitest';
import { ConsoleData, serveConsole } from '../../console/index.ts';
import { perPeerBound } from '../listeners.ts';

describe('the console bounds connections per peer', () => {
  test('the connection over the bound is closed at once; 127.0.0.2 is still served', async () => {
    const c = await serveConsole(new ConsoleData([]), '127.0.0.1', 0, { maxPerPeer: 3 });
    try {
      expect(await perPeerBound(Number(new URL(c.url).port), 3, '/')).toEqual({ extraClosed: true, heldOpen: true, otherServed: 200 });
    } finally {
      await c.close();
    }
  });
});
