import type { Bus } from '../bus/bus.js';
import type { Clock } from '../core/clock.js';
import type { Logger, RequestContext } from '../logging/logger.js';
import { EnvelopeSigner, EnvelopeVerifier, SignedBus, type SignatureMode } from './envelope.js';
import type { RefusalMetrics } from './verifying-handler.js';
import type { RoleKeys } from './keys.js';
import type { ProducerRole } from '../messages/table.js';
import { BATCHED_QUEUES, MESSAGES, PRODUCER_POLICY, type OrlojMessages } from '../messages/index.js';

/**
 * The bus as one role sees it: everything it publishes is signed with that
 * role's key, everything it consumes is verified against every role's public
 * key and orloj's producer policy, and every body it hands a handler went
 * through its type's decoder (MESSAGES). On the in-process bus envelopes go
 * unsigned (`SignatureMode`), unless `signatures: 'required'` asks otherwise.
 * On a broker, what it publishes together to BATCHED_QUEUES leaves in one
 * batch envelope (ADR 0024): one signature and one broker message for them
 * all. The in-process bus has neither to save.
 */
export function roleBus(options: {
  bus: Bus;
  role: ProducerRole;
  keys: RoleKeys;
  clock: Clock;
  logger: Logger;
  signatures?: SignatureMode;
  /** Whether what it publishes together is signed once (true unless set: BUS_BATCH). */
  batch?: boolean | undefined;
  /** Counts refused messages. */
  metrics?: RefusalMetrics | undefined;
  /** The process's request context: request ids travel on the messages (docs/bus.md, "Request ids"). */
  requestContext?: RequestContext | undefined;
}): SignedBus<OrlojMessages> {
  const { bus, role, keys, clock, logger } = options;
  const signatures = options.signatures ?? (bus.inProcess ? 'in-process' : 'required');
  const privateKey = keys.privateKeys[role];
  return new SignedBus({
    bus,
    logger,
    metrics: options.metrics,
    messages: MESSAGES,
    requestContext: options.requestContext,
    batched: bus.inProcess || options.batch === false ? undefined : BATCHED_QUEUES,
    verifier: new EnvelopeVerifier({ publicKeys: keys.publicKeys, policy: PRODUCER_POLICY, clock, signatures }),
    ...(privateKey ? { signer: new EnvelopeSigner({ role, privateKey, clock, signatures }) } : {}),
  });
}
