import type { CommitSignatureInfo } from '../git/signature.js';

/**
 * GitLab's Entities::CommitSignature for a signature whose key Depot does not store: GitLab's
 * answer for an unknown key. PGP: `unknown_key`, the issuer's key id from the signature packet
 * and no stored key fields; SSH: `unknown_key` with no key; X.509: `unverified` with no
 * certificate (no trust store is kept).
 */
export function presentCommitSignature(signature: CommitSignatureInfo) {
  switch (signature.type) {
    case 'PGP':
      return {
        signature_type: 'PGP',
        verification_status: 'unknown_key',
        gpg_key_id: null,
        gpg_key_primary_keyid: signature.keyId,
        gpg_key_user_name: null,
        gpg_key_user_email: null,
        gpg_key_subkey_id: null,
        commit_source: 'gitaly',
      };
    case 'SSH':
      return { signature_type: 'SSH', verification_status: 'unknown_key', key: null, commit_source: 'gitaly' };
    case 'X509':
      return {
        signature_type: 'X509',
        verification_status: 'unverified',
        x509_certificate: null,
        commit_source: 'gitaly',
      };
  }
}
