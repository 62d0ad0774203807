import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { signalSection } from './support/operations-doc.js';
import { needPrometheus } from './support/prometheus.js';

const DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../deploy/observability');

function promtool(binary: string, ...args: string[]): string {
  const r = spawnSync(binary, args, { cwd: DIR, encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool ${args.join(' ')}:\n${r.stdout}${r.stderr}`);
  return r.stdout + r.stderr;
}

/** deploy/observability/ as Prometheus's own tool sees it (Debian's prometheus package). */
describe('deploy/observability', function () {
  this.timeout(60_000);
  let tool: string;
  before(function () {
    tool = needPrometheus(this).promtool;
  });

  it('has alerting rules promtool accepts, and their unit tests pass', () => {
    assert.match(promtool(tool, 'check', 'rules', 'alerts.yml'), /SUCCESS: 8 rules found/);
    assert.match(promtool(tool, 'test', 'rules', 'alerts.test.yml'), /SUCCESS/);
  });

  it('has a scrape configuration promtool accepts', () => {
    assert.match(promtool(tool, 'check', 'config', 'prometheus.yml'), /is valid prometheus config file syntax/);
  });

  it('has an alert for every signal docs/operations.md promises, each with a section there that says what it means and what to do', () => {
    const rules = fs.readFileSync(path.join(DIR, 'alerts.yml'), 'utf8');
    const alerts = [...rules.matchAll(/- alert: (\w+)/g)].map((m) => m[1]!);
    for (const wanted of ['OrlojNoSchedulerLeader', 'OrlojScheduleLagHigh', 'OrlojSkippedSlots', 'OrlojDeadLetters', 'OrlojQueueGrowing', 'OrlojNotifierBacklog', 'OrlojRoleNotReady']) {
      assert.ok(alerts.includes(wanted), `${wanted} is missing`);
    }
    for (const alert of alerts) {
      // Headed by the name alone: the alert's description links to that anchor.
      assert.equal(signalSection(alert).heading, alert);
      assert.match(rules, new RegExp(`docs/operations\\.md#${alert.toLowerCase()}\\.`), `${alert} links to its section`);
    }
  });

  it('has a Grafana dashboard whose every panel queries Prometheus', () => {
    const dashboard = JSON.parse(fs.readFileSync(path.join(DIR, 'grafana-dashboard.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
    assert.ok(dashboard.panels.length >= 10);
    for (const panel of dashboard.panels) assert.ok(panel.targets.length > 0 && panel.targets.every((t) => t.expr.length > 0), panel.title);
  });
});
