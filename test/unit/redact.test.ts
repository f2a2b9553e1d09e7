import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/http/middleware.js';

describe('redactUrl', () => {
  it('hides every parameter that carries a secret, and nothing else', () => {
    const secrets = ['private_token', 'access_token', 'bearer_token', 'token', 'client_secret', 'password', 'code'];
    for (const name of [...secrets, 'refresh_token']) {
      expect(redactUrl(`/api/v4/user?page=2&${name}=s3cret&per_page=5`)).toBe(
        `/api/v4/user?page=2&${name}=[FILTERED]&per_page=5`,
      );
      expect(redactUrl(`/api/v4/user?${name.toUpperCase()}=s3cret`)).toBe(
        `/api/v4/user?${name.toUpperCase()}=[FILTERED]`,
      );
    }
    expect(redactUrl('/api/v4/projects?search=token&my_token_count=3')).toBe(
      '/api/v4/projects?search=token&my_token_count=3',
    );
  });
});
