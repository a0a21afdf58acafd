/**
 * The one NATS layer of the cluster (docs/cluster.md "The NATS layer"): a connection kept open
 * with retry ({@link NatsLink}), retry with backoff to a deadline, create-if-missing streams with
 * explicit placement, follow-from-start, and the subject and stream-name rules. The channel,
 * shard and FROST buses are built on it; it imports only core/.
 */
export { type NatsCounts, type NatsEvent, NatsLink, type NatsLinkOpts, serverList } from './connection.ts';
export {
  NATS_DEADLINE,
  NATS_UNAVAILABLE,
  type NatsNameCode,
  NatsNameCodes,
  NatsDeadline,
  NatsNameError,
  NatsUnavailable,
} from './errors.ts';
export { type Follow, type FollowedMsg, type FollowOpts, followFromStart } from './follow.ts';
export { checkStreamName, checkSubject, checkSubjectRoot, rootStreamName, storeNameOf } from './names.ts';
export { type Greeting, greetingServers, natsGreeting, natsHostPort } from './reach.ts';
export { backoffMs, type RetryOpts, retryUntil, withDeadline } from './retry.ts';
export {
  type EnsureOpts,
  type EnsureOutcome,
  ensureStream,
  isStreamNotFound,
  type StreamPlacement,
  type StreamShape,
  type StreamSpec,
  streamConfig,
} from './streams.ts';
