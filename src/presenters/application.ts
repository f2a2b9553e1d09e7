import type { OauthApplication } from '../db/schema.js';

/** GitLab's Entities::Application. */
export function presentApplication(app: OauthApplication) {
  return {
    id: app.id,
    application_id: app.uid,
    application_name: app.name,
    callback_url: app.redirect_uri,
    confidential: app.confidential,
  };
}

/** Entities::ApplicationWithSecret: only in the answer that created the application. */
export function presentApplicationWithSecret(app: OauthApplication, secret: string) {
  return { ...presentApplication(app), secret };
}
