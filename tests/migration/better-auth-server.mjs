// A real better-auth server (admin, organization and two-factor plugins) over HTTP on a loopback port, on SQLite (a
// better-sqlite3 file) or PostgreSQL (a pg pool): its own migrations create the tables, its own API fills them.
import http from "node:http";
import { betterAuth } from "better-auth";
import { getMigrations } from "better-auth/db/migration";
import { toNodeHandler } from "better-auth/node";
import { admin, organization, twoFactor } from "better-auth/plugins";

/** better-auth's secret: it encrypts the two-factor secrets, which the import reads with it. */
export const SECRET = "a test secret that is long enough for better-auth";

/** Starts better-auth on `database`; `adminUserIds` lets the first administrator give itself the role; `session`
 *  is better-auth's own option (benches/revocation.mjs turns its cookie cache on). */
export async function startBetterAuth(database, { adminUserIds = [], session } = {}) {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const baseURL = `http://127.0.0.1:${server.address().port}`;
  const auth = betterAuth({
    baseURL,
    secret: SECRET,
    database,
    emailAndPassword: { enabled: true },
    rateLimit: { enabled: false },
    session,
    plugins: [admin({ adminUserIds }), organization(), twoFactor()],
  });
  const { runMigrations } = await getMigrations(auth.options);
  await runMigrations();
  server.on("request", toNodeHandler(auth));
  return {
    auth,
    baseURL,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
