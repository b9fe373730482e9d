// A real SAML 2.0 identity provider for tests/api/saml.rs: samlify (npm) parses the service's AuthnRequest as it
// arrives by the HTTP-Redirect binding and signs the login response (xml-crypto, RSA-SHA256, exclusive C14N) that
// the test then posts to the service's ACS, as a browser would by the HTTP-POST binding.
//
// One JSON line in, one JSON line out. First line out: {entityID, cert, otherCert, sso}. Then per line in:
//   {sp: "<SP metadata XML the service served>", login: "<the redirect URL sign-in/sso gave>", email, name?,
//    variant?: {...}}
// answers {SAMLResponse, RelayState, acs, requestId} or {error}. `variant` bends the response for the refusals:
//   sign: "assertion" (default) | "response" | "both" | "none"; key: "other" (a key the service does not trust);
//   wrap: true (a second, unsigned assertion beside the signed one); doctype: "<!DOCTYPE …>" put before the root;
//   and any of the template's values replaced: Audience, SubjectRecipient, Destination, Issuer, InResponseTo,
//   AssertionID, ConditionsNotBefore, ConditionsNotOnOrAfter, SubjectConfirmationDataNotOnOrAfter, NameID;
//   authnContext: the AuthnContextClassRef in place of PasswordProtectedTransport (a multi-factor class, say);
//   attributes: {name: [values]} more attributes, each value an AttributeValue (the person's groups, say).
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createRequire } from "node:module";

const samlify = createRequire(import.meta.url)("samlify");

const here = new URL(".", import.meta.url).pathname;
const read = (name) => readFileSync(`${here}${name}`, "utf8");
const keys = {
  idp: { key: read("idp-key.pem"), cert: read("idp-cert.pem") },
  other: { key: read("other-key.pem"), cert: read("other-cert.pem") },
};

// samlify asks for a schema validator before it parses anything; the AuthnRequest is the service's own, and what
// is tested here is the service's checking of the response, not samlify's of the request.
samlify.setSchemaValidator({ validate: () => Promise.resolve("skipped") });

const entityID = "https://idp.saml.test/metadata";
const sso = "https://idp.saml.test/sso";
const idp = samlify.IdentityProvider({
  entityID,
  privateKey: keys.idp.key,
  signingCert: keys.idp.cert,
  singleSignOnService: [{ Binding: samlify.Constants.namespace.binding.redirect, Location: sso }],
  nameIDFormat: ["urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"],
  wantAuthnRequestsSigned: false,
});

const lib = samlify.SamlLib;
const attributeTemplate = (name, value) =>
  `<saml:Attribute Name="${name}" NameFormat="urn:oasis:names:tc:SAML:2.0:attrname-format:basic">` +
  `<saml:AttributeValue xsi:type="xs:string">${value}</saml:AttributeValue></saml:Attribute>`;
const escape = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

async function login({ sp: spMetadata, login: url, email, name, variant = {} }) {
  const sp = samlify.ServiceProvider({ metadata: spMetadata });
  const query = Object.fromEntries(new URL(url).searchParams);
  const parsed = await idp.parseLoginRequest(sp, "redirect", { query });
  const request = parsed.extract.request;
  const now = new Date();
  const later = new Date(now.getTime() + 5 * 60 * 1000);
  const acs = sp.entityMeta.getAssertionConsumerService("post");
  const values = {
    ID: "_r" + crypto.randomUUID().replace(/-/g, ""),
    AssertionID: "_a" + crypto.randomUUID().replace(/-/g, ""),
    Destination: acs,
    Audience: sp.entityMeta.getEntityID(),
    SubjectRecipient: acs,
    Issuer: entityID,
    IssueInstant: now.toISOString(),
    StatusCode: "urn:oasis:names:tc:SAML:2.0:status:Success",
    ConditionsNotBefore: now.toISOString(),
    ConditionsNotOnOrAfter: later.toISOString(),
    SubjectConfirmationDataNotOnOrAfter: later.toISOString(),
    NameIDFormat: "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress",
    NameID: email,
    InResponseTo: request.id,
    AuthnStatement:
      `<saml:AuthnStatement AuthnInstant="${now.toISOString()}" SessionIndex="_s1"><saml:AuthnContext>` +
      `<saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport` +
      `</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>`,
    AttributeStatement: "",
  };
  if (variant.authnContext) {
    values.AuthnStatement = values.AuthnStatement.replace(
      "urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport", escape(variant.authnContext));
  }
  for (const [k, v] of Object.entries(variant)) if (k in values) values[k] = v;
  const attributes = [attributeTemplate("email", escape(email))];
  if (name) attributes.push(attributeTemplate("name", escape(name)));
  for (const [attribute, values] of Object.entries(variant.attributes || {})) {
    const each = values.map((v) => `<saml:AttributeValue xsi:type="xs:string">${escape(v)}</saml:AttributeValue>`);
    attributes.push(attributeTemplate(escape(attribute), "").replace(/<saml:AttributeValue[\s\S]*<\/saml:AttributeValue>/, () => each.join("")));
  }
  let xml = lib
    .replaceTagsByValue(lib.defaultLoginResponseTemplate.context, values)
    .replace("{AttributeStatement}", "")
    .replace("</saml:Assertion>", `<saml:AttributeStatement>${attributes.join("")}</saml:AttributeStatement></saml:Assertion>`);
  // The template's values are escaped by replaceTagsByValue; the statements are markup, put in as they are.
  xml = xml.replace(escape(values.AuthnStatement), values.AuthnStatement);
  const signer = keys[variant.key || "idp"];
  const sign = variant.sign || "assertion";
  // The certificate as metadata carries it (base64, no PEM armour), which is what samlify's signer reads.
  const body = signer.cert.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  const config = { privateKey: signer.key, signingCert: body, isBase64Output: false };
  if (sign === "assertion" || sign === "both") {
    xml = lib.constructSAMLSignature({
      ...config,
      rawSamlMessage: xml,
      referenceTagXPath: "/*[local-name(.)='Response']/*[local-name(.)='Assertion']",
      signatureConfig: {
        prefix: "ds",
        location: { reference: "/*[local-name(.)='Response']/*[local-name(.)='Assertion']/*[local-name(.)='Issuer']", action: "after" },
      },
    });
  }
  if (sign === "response" || sign === "both") {
    xml = lib.constructSAMLSignature({
      ...config,
      rawSamlMessage: xml,
      isMessageSigned: true,
      signatureConfig: { prefix: "ds", location: { reference: "/*[local-name(.)='Response']/*[local-name(.)='Issuer']", action: "after" } },
    });
  }
  if (variant.wrap) {
    // Signature wrapping: an unsigned assertion for another address, put first, the signed one kept after it.
    const start = xml.indexOf("<saml:Assertion");
    const end = xml.indexOf("</saml:Assertion>") + "</saml:Assertion>".length;
    const evil = xml
      .slice(start, end)
      .replace(/<ds:Signature[\s\S]*<\/ds:Signature>/, "")
      .replace(/ID="[^"]+"/, 'ID="_evil"')
      .split(escape(email))
      .join(escape(variant.wrap));
    xml = xml.slice(0, start) + evil + xml.slice(start);
  }
  if (variant.doctype) xml = variant.doctype + xml;
  return {
    SAMLResponse: Buffer.from(xml).toString("base64"),
    RelayState: query.RelayState ?? null,
    acs,
    requestId: request.id,
  };
}

console.log(JSON.stringify({ entityID, sso, cert: keys.idp.cert, otherCert: keys.other.cert }));
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  try {
    console.log(JSON.stringify(await login(JSON.parse(line))));
  } catch (e) {
    console.log(JSON.stringify({ error: String(e && e.stack ? e.stack : e) }));
  }
}
