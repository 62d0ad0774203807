export { Notifier, type NotifierOptions, type NotifierMetrics } from './notifier.js';
export { OutboxRelay, type OutboxRelayOptions } from './outbox-relay.js';
export { notificationFor, type NotificationContent } from './rules/notification.rule.js';
