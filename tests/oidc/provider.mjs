// A real OpenID Connect provider (oidc-provider, OpenID Certified) on loopback, for the tests of sign-in through
// another identity provider. Started by the Rust HTTP tests (tests/api/oauth.rs) and by client.test.mjs:
//
//   node provider.mjs            prints {"issuer": "http://127.0.0.1:<port>"} once listening, then reads ONE line
//                                of JSON from stdin: {"clients": [{client_id, client_secret, redirect_uris}],
//                                "foreignKey"?: true, "clockSkewSecs"?: -7200}, and prints {"ready": true}.
//
// The clients come after the issuer because the service's callback URL (its port) is known only once it runs,
// and it needs the issuer to start. Test behaviours, each a real provider doing something wrong:
//   foreignKey     the published key set holds another key under the signing key's id: every ID token is
//                  signed by a key the service cannot verify.
//   clockSkewSecs  the provider's clock runs that far off: with -7200 every ID token expired an hour ago.
//
// Logging in: GET /interaction/<uid> shows a form; POST it with login=<e-mail>. The account's subject is the
// login; "<e-mail>#unverified" is an identity whose address the provider does not say it verified; "<e-mail>#mfa"
// signs the same account in with a password and a one-time code (the ID token's amr is ["pwd", "otp"]) and
// "<e-mail>#pwd" with a password alone (["pwd"]). "#groups=a,b" (beside the others) says which groups the person
// is in from this login on (the ID token's `groups` claim; none without it), as a directory's change would: the
// account stays the same. Consent is granted at once.
import http from 'node:http';
import crypto from 'node:crypto';
import readline from 'node:readline';
import Provider from 'oidc-provider';

function rsaJwk(kid) {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    private: { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' },
    public: { ...publicKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' },
  };
}

// The groups each account is in, as its last login said.
const groupsOf = new Map();

function account(login) {
  const [email, flag] = login.split('#');
  return {
    accountId: login,
    async claims() {
      return {
        sub: login,
        email,
        email_verified: flag !== 'unverified',
        name: email.split('@')[0].replace(/^./, (c) => c.toUpperCase()),
        groups: groupsOf.get(login),
      };
    },
  };
}

let provider = null;
const server = http.createServer(async (req, res) => {
  if (!provider) {
    res.writeHead(503).end('not configured yet');
    return;
  }
  const interaction = req.url.match(/^\/interaction\/([^/?]+)/);
  if (!interaction) {
    provider.callback()(req, res);
    return;
  }
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === 'login' && req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<form method="post" action="/interaction/${details.uid}"><input name="login"><button>Sign in</button></form>`);
      return;
    }
    if (details.prompt.name === 'login') {
      const body = await new Promise((resolve) => {
        let data = '';
        req.on('data', (c) => { data += c; });
        req.on('end', () => resolve(new URLSearchParams(data)));
      });
      // "#mfa" and "#pwd" say how the person authenticated (the ID token's amr) and are not part of the account.
      const [who, ...flags] = body.get('login').split('#');
      const amr = flags.includes('mfa') ? ['pwd', 'otp'] : flags.includes('pwd') ? ['pwd'] : undefined;
      const groups = flags.find((f) => f.startsWith('groups='));
      const accountId = [who, ...flags.filter((f) => f !== 'mfa' && f !== 'pwd' && f !== groups)].join('#');
      groupsOf.set(accountId, groups ? groups.slice('groups='.length).split(',') : undefined);
      const result = { login: { accountId, ...(amr ? { amr } : {}) } };
      await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
      return;
    }
    // consent: grant what the client asked for
    const grant = new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    grant.addOIDCScope(details.params.scope);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  } catch (e) {
    res.writeHead(400, { 'content-type': 'text/plain' }).end(String(e));
  }
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
  const lines = readline.createInterface({ input: process.stdin });
  lines.once('line', (line) => {
    const options = JSON.parse(line);
    const signing = rsaJwk('key-1');
    if (options.clockSkewSecs) {
      const realNow = Date.now;
      Date.now = () => realNow() + options.clockSkewSecs * 1000;
    }
    provider = new Provider(issuer, {
      clients: options.clients.map((c) => ({
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        ...c,
      })),
      jwks: { keys: [signing.private] },
      findAccount: (ctx, id) => account(id),
      // amr with openid, so the ID token carries it whenever the login gave one (a standalone claim would need
      // the authorization request's claims parameter).
      // groups too: Okta and Entra ID put the groups claim in the ID token, where the service reads it.
      claims: { openid: ['sub', 'amr', 'groups'], email: ['email', 'email_verified'], profile: ['name'] },
      features: { devInteractions: { enabled: false } },
      interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
      pkce: { required: () => true },
      cookies: { keys: [crypto.randomBytes(16).toString('hex')] },
    });
    if (options.foreignKey) {
      const other = rsaJwk('key-1');
      provider.use(async (ctx, next) => {
        await next();
        if (ctx.path === '/jwks') ctx.body = { keys: [other.public] };
      });
    }
    process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  });
  // The test that started this provider is gone: so is the provider.
  process.stdin.on('end', () => process.exit(0));
});
