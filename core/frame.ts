/**
 * The Frame (spec §6): one typed envelope for the tool layer and the agent layer.
 * `trust = data` marks untrusted output; a data frame can never exercise a capability (§7 check 1).
 */
import type { ContentId } from './hash.ts';
import { asCid, asEnum, asObj, asText, type Obj } from './schema.ts';

/** The four frame kinds (§6). */
export const FRAME_KINDS = ['tool-call', 'tool-result', 'agent-task', 'agent-reply'] as const;
/** A frame kind. */
export type FrameKind = (typeof FRAME_KINDS)[number];
/** The two trust tags (§6). */
export const TRUST_TAGS = ['control', 'data'] as const;
/** A trust tag: `control` may exercise a capability, `data` never may. */
export type Trust = (typeof TRUST_TAGS)[number];

/** A frame (§6). Content ids are 64 lowercase hex chars. */
export interface Frame {
  readonly kind: FrameKind;
  readonly trust: Trust;
  readonly grant_id: ContentId;
  readonly action: string;
  readonly resource: ContentId;
  readonly payload_hash: ContentId;
}

/** The plain CBOR map of a frame. */
export function frameToCbor(f: Frame): Obj {
  return {
    kind: f.kind,
    trust: f.trust,
    grant_id: f.grant_id,
    action: f.action,
    resource: f.resource,
    payload_hash: f.payload_hash,
  };
}

/**
 * Reads a decoded CBOR map as a Frame.
 * @throws JcpError `schema` naming the field.
 */
export function readFrame(v: unknown, field = 'frame'): Frame {
  const o = asObj(v, field, ['kind', 'trust', 'grant_id', 'action', 'resource', 'payload_hash']);
  return {
    kind: asEnum(o['kind'], `${field}.kind`, FRAME_KINDS),
    trust: asEnum(o['trust'], `${field}.trust`, TRUST_TAGS),
    grant_id: asCid(o['grant_id'], `${field}.grant_id`),
    action: asText(o['action'], `${field}.action`, 256),
    resource: asCid(o['resource'], `${field}.resource`),
    payload_hash: asCid(o['payload_hash'], `${field}.payload_hash`),
  };
}
