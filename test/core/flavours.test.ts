/**
 * The flavoured brands of core/ (docs/design.md "Encodings (decided here so that vectors agree)"): a content id and a did:key are both
 * strings, but neither may stand for the other. The `@ts-expect-error` lines are the check: `tsc
 * -p .` (npm run check) fails if any of them stops being an error, i.e. if the brands are removed.
 */
import { describe, expect, it } from 'vitest';
import { type ContentId, contentIdOfBytes, type Did, didFromPublicKey } from '../../core/index.ts';

function wantsContentId(id: ContentId): string {
  return id;
}
function wantsDid(did: Did): string {
  return did;
}

describe('flavoured brands', () => {
  const id = contentIdOfBytes(new Uint8Array([1, 2, 3]));
  const did = didFromPublicKey(new Uint8Array(32).fill(7));

  it('a minted value goes where its own kind is wanted, and a plain string still does', () => {
    expect(wantsContentId(id)).toMatch(/^[0-9a-f]{64}$/);
    expect(wantsDid(did)).toMatch(/^did:key:z/);
    expect(wantsContentId('00'.repeat(32))).toBe('00'.repeat(32));
  });

  it('a did:key is refused where a content id is wanted, and the other way round (checked by tsc)', () => {
    // @ts-expect-error a Did is not a ContentId
    const a = wantsContentId(did);
    // @ts-expect-error a ContentId is not a Did
    const b = wantsDid(id);
    expect([a, b]).toEqual([did, id]);
  });
});
