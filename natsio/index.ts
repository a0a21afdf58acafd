/**
 * The one NATS layer of the cluster (docs/cluster.md "The NATS layer"): a connection kept open
 * with retry ({@link NatsLink}), retry with backoff to a deadline, create-if-missing streams with
 * explicit placement, follow-from-start, and the subject and stream-name rules. The channel,
 * shard and FROST buses are built on it; it imports only core/.
 */
export { type NatsEvent, NatsLink, type NatsLinkOpts } from './connection.ts';
export { NATS_DEADLINE, NATS_UNAVAILABLE, NatsNameCodes, NatsNameError, NatsUnavailable } from './errors.ts';
export { type FollowedMsg, followFromStart } from './follow.ts';
export { checkStreamName, checkSubject, checkSubjectRoot, rootStreamName, storeNameOf } from './names.ts';
export { greetingServers, natsGreeting, natsHostPort } from './reach.ts';
export { retryUntil, withDeadline } from './retry.ts';
export { ensureStream, isStreamNotFound, type StreamPlacement, type StreamSpec, streamConfig } from './streams.ts';
export { DELIVER, DISCARD, jetStreamLib, RETENTION_LIMITS, STORAGE_FILE } from './lib.ts';
