// Boots a node worker thread: registers tsx's loader (worker threads do not inherit it), then
// loads the TypeScript entry named in workerData.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
