export {
  EnvelopeSigner,
  EnvelopeVerifier,
  sealAndPublish,
  SignedBus,
  type Envelope,
  type ProducerPolicy,
  type RejectionReason,
  type SealOptions,
  type SignedConsumeOptions,
  type TypedEnvelope,
  type VerifierOptions,
  type VerifyResult,
} from './envelope.js';
export { verifyingHandler, type EnvelopeHandler, type RefusalMetrics, type VerifyingOptions } from './verifying-handler.js';
export { BATCH_TYPE, type BatchItem } from './batch.js';
export {
  ensureKeyDir,
  keyEnvName,
  keyFingerprint,
  loadKeysFromEnv,
  privateKeyFromPem,
  publicKeyFromPem,
  requireRoleKeys,
  ROLE_VERIFIES,
  type RoleKeys,
} from './keys.js';
export {
  decoded,
  isProducerRole,
  PRODUCER_ROLES,
  messageSpec,
  producerPolicy,
  unusable,
  type Decoded,
  type MessageSpec,
  type MessageTable,
  type MessageType,
  type ProducerRole,
  type ReadBody,
  type UntypedMessages,
  type WireBody,
} from '../messages/table.js';
export { roleBus } from './role-bus.js';
