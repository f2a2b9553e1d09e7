/** A one-line text progress bar: `[#########...........]  45.0%  12.3 MiB / 27.1 MiB`. */
export function progressBar(done: number, total: number, width = 30): string {
  const fraction = total <= 0 ? 1 : Math.min(1, Math.max(0, done / total));
  const filled = Math.round(fraction * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${(fraction * 100).toFixed(1).padStart(5)}%  ${formatBytes(done)} / ${formatBytes(total)}`;
}

/** Bytes in binary units with one decimal (`1.5 MiB`). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}
