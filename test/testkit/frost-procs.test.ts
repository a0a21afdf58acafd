/**
 * The participant launcher (testkit/frost-procs.ts) under a participant that never prints
 * `ready`: the start rejects and the child it spawned is stopped, so a caller that gives up (the
 * demo, `npm start`) exits instead of waiting forever on a child's pipes.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ParticipantCluster, startParticipantProc } from '../../testkit/internal.ts';

const SILENT = resolve(import.meta.dirname, 'fixtures/silent-participant.ts');
const dir = mkdtempSync(join(tmpdir(), 'jcp-frost-procs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Waits for a participant's pid file (the fixture writes it on start). */
async function pidOf(keystore: string): Promise<number> {
  for (let i = 0; i < 200 && !existsSync(join(keystore, 'pid')); i++) await new Promise((r) => setTimeout(r, 100));
  return Number(readFileSync(join(keystore, 'pid'), 'utf8'));
}

describe('participant launcher: a participant that is never ready', () => {
  it('startParticipantProc rejects on the ready timeout and stops the child', async () => {
    const keystore = join(dir, 'one');
    await expect(
      startParticipantProc({ keystore, natsUrl: 'nats://127.0.0.1:1', prefix: 'jcp.test.silent', script: SILENT }, 8_000),
    ).rejects.toThrow(/timed out waiting for ready/);
    const pid = await pidOf(keystore);
    for (let i = 0; i < 50 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    expect(alive(pid)).toBe(false);
  }, 30_000);

  it('ParticipantCluster.start rejects and leaves no participant running', async () => {
    const root = join(dir, 'cluster');
    await expect(
      ParticipantCluster.start(
        2,
        { natsUrl: 'nats://127.0.0.1:1', prefix: 'jcp.test.silent', script: SILENT, readyTimeoutMs: 8_000 },
        root,
      ),
    ).rejects.toThrow(/timed out waiting for ready/);
    const pids = [await pidOf(join(root, 'p1')), await pidOf(join(root, 'p2'))];
    for (let i = 0; i < 50 && pids.some(alive); i++) await new Promise((r) => setTimeout(r, 100));
    expect(pids.filter(alive)).toEqual([]);
  }, 30_000);
});
