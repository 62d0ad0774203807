import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { requireServices } from '@orloj/common/test-support';
import { validateManifest } from './support/kubernetes-schema.js';

/**
 * deploy/kubernetes: every overlay renders with `kubectl kustomize` (offline), every
 * object passes strict validation against the Kubernetes schemas (unknown fields and
 * wrong types are errors), and the properties operators rely on hold: probes,
 * resources and the restricted security profile on every pod, runners scaled on their
 * own, a disruption budget per role, runners kept away from the database.
 */
const run = promisify(execFile);
const deployDir = path.resolve(import.meta.dirname, '..');

type Obj = Record<string, any>;

async function hasKubectl(): Promise<boolean> {
  try {
    await run('kubectl', ['version', '--client']);
    return true;
  } catch {
    return false;
  }
}

describe('deploy/kubernetes: kustomize overlays', function () {
  this.timeout(120_000);
  let work: string;
  const rendered = new Map<string, Obj[]>();

  before(async function () {
    if (!(await hasKubectl())) {
      if (requireServices) throw new Error('REQUIRE_SERVICES=1 but kubectl is not installed');
      this.skip();
    }
    // A copy, so the one-time secrets step runs as an operator would without touching the tree.
    work = await mkdtemp(path.join(tmpdir(), 'orloj-k8s-'));
    await cp(deployDir, work, { recursive: true, filter: (src) => !src.includes(`${path.sep}secrets`) });
    await run(path.join(work, 'kubernetes/make-secrets.sh'), [], { timeout: 60_000 });
    for (const overlay of ['embedded', 'distributed']) {
      const { stdout } = await run('kubectl', ['kustomize', path.join(work, 'kubernetes/overlays', overlay)], { maxBuffer: 32 << 20 });
      rendered.set(
        overlay,
        parseAllDocuments(stdout).map((d) => d.toJS() as Obj),
      );
    }
  });

  after(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  const objects = (overlay: string, kind?: string) => (rendered.get(overlay) ?? []).filter((o) => !kind || o.kind === kind);
  const named = (overlay: string, kind: string, name: string) => {
    const found = objects(overlay, kind).find((o) => o.metadata.name === name || String(o.metadata.name).startsWith(`${name}-`));
    assert.ok(found, `${overlay}: no ${kind} ${name}`);
    return found;
  };

  it('the validator itself rejects unknown fields, wrong types and missing required fields', async () => {
    const problems = await validateManifest({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'bad' },
      spec: {
        selector: { matchLabels: { a: 'b' } },
        template: { spec: { containers: [{ name: 'c', image: 'i', imagePullPolcy: 'Always', ports: [{ containerPort: '80' }] }] } },
        replica: 2,
      },
    } as Obj);
    const text = problems.map((p) => `${p.path} ${p.message}`).join('\n');
    assert.match(text, /imagePullPolcy/);
    assert.match(text, /replica"/);
    assert.match(text, /containerPort must be integer/);
    const missing = await validateManifest({ apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { ports: [{}] } } as Obj);
    assert.match(missing.map((p) => p.message).join('\n'), /port/);
  });

  for (const overlay of ['embedded', 'distributed']) {
    it(`${overlay}: every object is valid against the Kubernetes schemas, strictly`, async () => {
      const docs = objects(overlay);
      assert.ok(docs.length > 5, `${overlay} rendered ${docs.length} objects`);
      const problems = (await Promise.all(docs.map((d) => validateManifest(d)))).flat();
      assert.deepEqual(problems, [], problems.map((p) => `${p.resource} ${p.path}: ${p.message}`).join('\n'));
      for (const d of docs) assert.equal(d.metadata.namespace, 'orloj', `${d.kind}/${d.metadata.name} namespace`);
    });

    it(`${overlay}: every pod has probes, resources and the restricted security profile`, () => {
      const deployments = objects(overlay, 'Deployment');
      assert.ok(deployments.length > 0);
      for (const d of deployments) {
        const pod = d.spec.template.spec;
        const who = `${overlay} ${d.metadata.name}`;
        assert.equal(pod.securityContext.runAsNonRoot, true, who);
        assert.equal(pod.securityContext.seccompProfile.type, 'RuntimeDefault', who);
        assert.equal(pod.automountServiceAccountToken, false, who);
        for (const c of pod.containers) {
          assert.equal(c.securityContext.allowPrivilegeEscalation, false, who);
          assert.equal(c.securityContext.readOnlyRootFilesystem, true, who);
          assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], who);
          assert.equal(c.readinessProbe.httpGet.path, '/readyz', who);
          assert.equal(c.livenessProbe.httpGet.path, '/livez', who);
          assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory, who);
          assert.match(c.image, /^registry\.example\.com\/orloj\/orloj:/, who);
          // The read-only root needs writable /tmp and DATA_DIR mounts.
          const mounts = c.volumeMounts.map((m: Obj) => m.mountPath);
          assert.ok(mounts.includes('/tmp') && mounts.includes('/data'), `${who}: ${mounts}`);
          // Every probe's port is one the container declares.
          const ports = c.ports.map((p: Obj) => p.name);
          for (const probe of [c.readinessProbe, c.livenessProbe, c.startupProbe]) assert.ok(ports.includes(probe.httpGet.port), who);
        }
        // Every Secret and ConfigMap a pod names is in the rendering (hash-suffixed names included).
        const names = new Set(objects(overlay).map((o) => `${o.kind}/${o.metadata.name}`));
        for (const v of pod.volumes) if (v.secret) assert.ok(names.has(`Secret/${v.secret.secretName}`), `${who}: secret ${v.secret.secretName}`);
        for (const c of pod.containers) {
          for (const e of c.envFrom ?? []) if (e.configMapRef) assert.ok(names.has(`ConfigMap/${e.configMapRef.name}`), who);
        }
        // A PodDisruptionBudget covers every Deployment.
        const labels = d.spec.template.metadata.labels;
        assert.ok(
          objects(overlay, 'PodDisruptionBudget').some((p) => Object.entries(p.spec.selector.matchLabels as Obj).every(([k, v]) => labels[k] === v)),
          `${who}: no PodDisruptionBudget`,
        );
      }
    });

    it(`${overlay}: the Ingress routes /api with the contract's limits`, () => {
      const ingresses = objects(overlay, 'Ingress');
      const main = named(overlay, 'Ingress', 'orloj');
      assert.ok(main.spec.rules[0].http.paths.some((p: Obj) => p.path === '/api'));
      assert.equal(main.metadata.annotations['nginx.ingress.kubernetes.io/limit-rps'], '20');
      assert.equal(main.metadata.annotations['nginx.ingress.kubernetes.io/limit-burst-multiplier'], '2');
      for (const i of ingresses) assert.equal(i.metadata.annotations['nginx.ingress.kubernetes.io/proxy-body-size'] ?? '4m', '4m');
      const auth = named(overlay, 'Ingress', 'orloj-auth');
      assert.equal(auth.metadata.annotations['nginx.ingress.kubernetes.io/limit-rpm'], '10');
      const events = named(overlay, 'Ingress', 'orloj-events');
      assert.equal(events.metadata.annotations['nginx.ingress.kubernetes.io/limit-connections'], '5');
      assert.equal(events.metadata.annotations['nginx.ingress.kubernetes.io/proxy-buffering'], 'off');
      for (const i of ingresses) for (const r of i.spec.rules) for (const p of r.http.paths) assert.equal(p.backend.service.name, 'orloj-api');
      const svc = named(overlay, 'Service', 'orloj-api');
      assert.equal(svc.spec.selector['app.kubernetes.io/component'], 'api');
      assert.ok(objects(overlay, 'Deployment').some((d) => d.spec.template.metadata.labels['app.kubernetes.io/component'] === 'api'));
    });
  }

  it('embedded: one replica on a persistent volume, recreated rather than rolled', () => {
    const [d, ...more] = objects('embedded', 'Deployment');
    assert.equal(more.length, 0);
    assert.equal(d!.spec.replicas, 1);
    assert.equal(d!.spec.strategy.type, 'Recreate');
    const data = d!.spec.template.spec.volumes.find((v: Obj) => v.name === 'data');
    assert.equal(data.persistentVolumeClaim.claimName, named('embedded', 'PersistentVolumeClaim', 'orloj-data').metadata.name);
    assert.deepEqual(d!.spec.template.spec.containers[0].args, ['start']);
  });

  it('distributed: a Deployment per role, runners autoscaled, per-role client certificates', () => {
    const roles = ['api', 'scheduler', 'runners', 'log-ingest', 'notifier'];
    for (const role of roles) {
      const d = named('distributed', 'Deployment', `orloj-${role}`);
      const c = d.spec.template.spec.containers[0];
      assert.deepEqual(c.args, ['start', '--roles', role]);
      const env = Object.fromEntries((c.env as Obj[]).map((e) => [e.name, e.value]));
      assert.match(env.BUS_URL, /^amqps:\/\//, role);
      assert.ok(env.BUS_TLS_CERT_FILE && env.BUS_TLS_KEY_FILE && env.BUS_TLS_CA_FILE, role);
      if (role === 'runners') assert.equal(env.DATABASE_URL, undefined, 'runners never get the database');
      else {
        assert.equal(env.DATABASE_URL, `postgres://orloj-${role}@postgres:5432/orloj`, role);
        assert.ok(env.DATABASE_TLS_CERT_FILE && env.DATABASE_TLS_KEY_FILE && env.DATABASE_TLS_CA_FILE, role);
      }
      const tls = d.spec.template.spec.volumes.find((v: Obj) => v.name === 'tls');
      const secret = named('distributed', 'Secret', `orloj-tls-${role}`);
      assert.equal(tls.secret.secretName, secret.metadata.name);
      assert.deepEqual(Object.keys(secret.data).sort(), ['ca.crt', 'tls.crt', 'tls.key']);
      const cert = Buffer.from(secret.data['tls.crt'], 'base64').toString();
      assert.match(cert, /BEGIN CERTIFICATE/);
      // Bus signing: every public key, and this role's private key only.
      const keys = d.spec.template.spec.volumes.find((v: Obj) => v.name === 'signing-keys');
      const names = (keys.projected.sources as Obj[]).map((s) => s.secret.name as string);
      assert.equal(names.length, 2);
      assert.ok(names.includes(named('distributed', 'Secret', 'orloj-signing-public').metadata.name));
      const own = named('distributed', 'Secret', `orloj-signing-${role}`);
      assert.ok(names.includes(own.metadata.name));
      assert.deepEqual(Object.keys(own.data), [`${role}.key`]);
      for (const other of roles) {
        assert.equal(env[`ORLOJ_${other.toUpperCase().replace('-', '_')}_PUBLIC_KEY_FILE`], `/etc/orloj/keys/${other}.pub`);
        assert.equal(env[`ORLOJ_${other.toUpperCase().replace('-', '_')}_PRIVATE_KEY_FILE`], other === role ? `/etc/orloj/keys/${role}.key` : undefined);
      }
    }
    const hpa = named('distributed', 'HorizontalPodAutoscaler', 'orloj-runners');
    assert.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'orloj-runners' });
    assert.ok(hpa.spec.maxReplicas > hpa.spec.minReplicas);
    assert.ok(named('distributed', 'Deployment', 'orloj-api').spec.replicas >= 2);
    assert.ok(named('distributed', 'Deployment', 'orloj-scheduler').spec.replicas >= 2);
  });

  it('distributed: runners reach the broker and the outside world, never the database', () => {
    const policies = objects('distributed', 'NetworkPolicy');
    const deny = named('distributed', 'NetworkPolicy', 'orloj-default-deny');
    assert.deepEqual(deny.spec.podSelector, {});
    assert.deepEqual(deny.spec.policyTypes, ['Ingress', 'Egress']);
    const runnerLabels = { 'app.kubernetes.io/component': 'runners', 'app.kubernetes.io/name': 'orloj' };
    const selects = (sel: Obj, labels: Record<string, string>) =>
      Object.entries((sel.matchLabels ?? {}) as Obj).every(([k, v]) => labels[k] === v) &&
      ((sel.matchExpressions ?? []) as Obj[]).every((e) => e.operator === 'In' && e.values.includes(labels[e.key]));
    const egress = policies.filter((p) => p.spec.policyTypes.includes('Egress') && selects(p.spec.podSelector, runnerLabels)).flatMap((p) => (p.spec.egress ?? []) as Obj[]);
    const ports = egress.flatMap((rule) => ((rule.ports ?? []) as Obj[]).map((p) => p.port));
    assert.ok(ports.includes(5671), 'runners reach the broker');
    assert.ok(!ports.includes(5432), 'runners never reach PostgreSQL');
    const peers = egress.flatMap((rule) => (rule.to ?? []) as Obj[]);
    assert.ok(!peers.some((p) => p.podSelector?.matchLabels?.['app.kubernetes.io/name'] === 'postgresql'));
    const world = peers.find((p) => p.ipBlock?.cidr === '0.0.0.0/0');
    assert.ok(world, 'runners reach the outside world');
    // ...but not the cluster's private ranges, where the database lives.
    for (const cidr of ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']) assert.ok(world.ipBlock.except.includes(cidr), cidr);
  });
});
