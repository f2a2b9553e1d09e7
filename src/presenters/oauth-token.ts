import type { OauthAccessToken, OauthApplication } from '../db/schema.js';
import type { IssuedToken } from '../services/oauth.js';

const epochSeconds = (date: Date) => Math.floor(date.getTime() / 1000);

/** The token endpoint's answer (RFC 6749 §5.1, Doorkeeper's body keys). */
export function presentTokenResponse(issued: IssuedToken) {
  return {
    access_token: issued.accessToken,
    token_type: 'Bearer',
    expires_in: issued.token.expires_in,
    refresh_token: issued.refreshToken,
    scope: issued.token.scopes.join(' '),
    created_at: epochSeconds(issued.token.created_at),
  };
}

/** `GET /oauth/token/info`, with GitLab's deprecated aliases `scopes` and `expires_in_seconds`. */
export function presentTokenInfo(token: OauthAccessToken, app: OauthApplication, expiresIn: number) {
  return {
    resource_owner_id: token.user_id,
    scope: token.scopes,
    expires_in: expiresIn,
    application: { uid: app.uid },
    created_at: epochSeconds(token.created_at),
    scopes: token.scopes,
    expires_in_seconds: expiresIn,
  };
}
