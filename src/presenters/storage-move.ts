import type { Namespace, StorageMove } from '../db/schema.js';
import { isoTime } from '../lib/clock.js';
import { MOVE_STATE_NAMES } from '../storage/moves.js';
import { namespaceWebUrl } from './namespace.js';
import type { PresentContext } from './user.js';

/** GitLab's BasicRepositoryStorageMove entity. */
export function presentBasicStorageMove(move: StorageMove) {
  return {
    id: move.id,
    created_at: isoTime(move.created_at),
    state: MOVE_STATE_NAMES[move.state] ?? 'initial',
    source_storage_name: move.source_storage_name,
    destination_storage_name: move.destination_storage_name,
    error_message: move.error_message,
  };
}

/** Projects::RepositoryStorageMove: the basic move plus the project's identity. */
export function presentProjectStorageMove(move: StorageMove, project: Record<string, unknown> | null) {
  return { ...presentBasicStorageMove(move), project };
}

/** Groups::RepositoryStorageMove: the basic move plus BasicGroupDetails. */
export function presentGroupStorageMove(move: StorageMove, group: Namespace | null, pc: PresentContext) {
  return {
    ...presentBasicStorageMove(move),
    group: group ? { id: group.id, web_url: namespaceWebUrl(group, pc), name: group.name } : null,
  };
}

/** Snippets::RepositoryStorageMove (Depot has no snippets: the snippet is always null). */
export function presentSnippetStorageMove(move: StorageMove) {
  return { ...presentBasicStorageMove(move), snippet: null };
}
