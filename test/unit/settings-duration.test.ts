import { describe, expect, it } from 'vitest';
import { canonicalChange, parseDuration } from '../../src/services/application-settings.js';

describe('human durations of the settings (ChronicDuration forms)', () => {
  it('reads the forms GitLab documents and refuses the rest', () => {
    expect(parseDuration('15 days')).toBe(15 * 86400);
    expect(parseDuration('1 month')).toBe(30 * 86400);
    expect(parseDuration('2 years')).toBe(2 * 365 * 86400);
    expect(parseDuration('1 day and 2 hours')).toBe(86400 + 7200);
    expect(parseDuration('1.5 hours')).toBe(5400);
    expect(parseDuration('3600')).toBe(3600);
    expect(parseDuration('never')).toBe(0);
    expect(parseDuration('1d')).toBe(86400);
    for (const bad of ['soon', '5 fortnights', '', 'days']) expect(parseDuration(bad), bad).toBeUndefined();
  });
});

describe('names a PUT may use', () => {
  it('maps the spec’s neutral names and the deprecated ones to GitLab’s, the successor winning', () => {
    expect(
      canonicalChange({
        spam_filter_enabled: true,
        admin_notification_email: 'old@example.com',
        abuse_notification_email: 'new@example.com',
        enabled_git_access_protocol: 'all',
        restricted_visibility_levels: ['0', 'public'],
        hashed_storage_enabled: false,
        not_a_setting: 1,
      }),
    ).toEqual({
      akismet_enabled: true,
      abuse_notification_email: 'new@example.com',
      enabled_git_access_protocol: null,
      restricted_visibility_levels: ['private', 'public'],
    });
  });
});
