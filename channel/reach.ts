/**
 * The NATS greeting probe, kept at this path for existing importers: it lives in the NATS layer
 * (natsio/reach.ts).
 */
export { type Greeting, greetingServers, NATS_UNAVAILABLE, NatsUnavailable, natsGreeting, natsHostPort } from '../natsio/index.ts';
