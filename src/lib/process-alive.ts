/**
 * Whether a process of this host exists: signal 0 reaches it, or it belongs to another user
 * (EPERM), which still means it runs.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
