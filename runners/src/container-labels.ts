/** Labels on every container a runner starts, read back when it sweeps leftovers. */

/** Every container a runner starts carries its runner id, so a restarted runner can sweep its own leftovers. */
export const RUNNER_ID_LABEL = 'orloj.runner_id';
export const WORKFLOW_ID_LABEL = 'orloj.workflow_id';
/** The installation (keyFingerprint of its scheduler key): runners of another installation on the same runtime leave these alone. */
export const INSTALLATION_LABEL = 'orloj.installation';
export const ATTEMPT_LABEL = 'orloj.attempt';
