import fs from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  cpu: string;
  cores: number;
  ramGiB: number;
  node: string;
  os: string;
  /** 1, 5 and 15 minute load averages when measured: anything well above 0 means other work competed. */
  loadAverage: [number, number, number];
}

function cpuModel(): string {
  try {
    const line = fs
      .readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line) return line.slice(line.indexOf(':') + 1).trim();
  } catch {
    // not Linux
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

function osName(): string {
  let distro: string | undefined;
  try {
    const m = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(fs.readFileSync('/etc/os-release', 'utf8'));
    distro = m?.[1];
  } catch {
    // not Linux
  }
  const kernel = `${os.type()} ${os.release()} ${os.arch()}`;
  return distro ? `${distro} (${kernel})` : kernel;
}

export function machineInfo(): MachineInfo {
  return {
    cpu: cpuModel(),
    cores: os.availableParallelism(),
    ramGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    os: osName(),
    loadAverage: os.loadavg().map((l) => Math.round(l * 100) / 100) as [number, number, number],
  };
}
