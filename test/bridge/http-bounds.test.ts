/**
 * The bridge's HTTP and A2A faces bound their connections (bridge/http.ts, bridge/a2a.ts over
 * io/httplimits.ts): one connection over the per-peer bound is closed as it is accepted, before
 * any bearer token is read, while another loopback address is still answered.
 */
import { describe, expect, test } from 'vitest';
import { BridgeAgent, CallJournal, serveBridgeA2a, serveBridgeHttp } from '../../bridge/index.ts';
import type { JcpClient } from '../../client/index.ts';
import { perPeerBound } from '../listeners.ts';
import { cast } from '../node/fixtures.ts';

const { bob } = cast('bridge-http-bounds');
/** No node: nothing here reaches it. */
/** A face on an ephemeral loopback port, at most 3 connections per peer. */
const face = () => ({ host: '127.0.0.1', port: 0, agents: [{ agent: agent() }], connectionLimits: { maxPerPeer: 3 } });
const agent = () => new BridgeAgent({ name: 'bob', signer: bob, chains: [], client: {} as JcpClient, journal: new CallJournal() });

describe('the bridge faces bound connections per peer', () => {
  const faces = {
    HTTP: () => serveBridgeHttp({ ...face(), agents: [{ agent: agent(), token: 't0ken-value' }] }),
    A2A: () => serveBridgeA2a(face()),
  };
  test.each([
    ['HTTP', '/mcp', 401],
    ['A2A', '/none', 404],
  ] as const)('%s: the connection over the bound is closed at once; 127.0.0.2 is still answered', async (name, path, status) => {
    const b = await faces[name]();
    try {
      expect(await perPeerBound(b.port, 3, path)).toEqual({ extraClosed: true, heldOpen: true, otherServed: status });
    } finally {
      await b.close();
    }
  });
});
