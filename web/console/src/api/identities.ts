// Identities: who is signed in (viewer), every identity, creating and revoking one.
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const ViewerQuery = graphql(`
  query Viewer {
    viewer { name permissions grants { permission cluster } }
  }
`);

export const IdentityRowFragment = graphql(`
  fragment IdentityRow on Identity {
    name permissions grants { permission cluster } createdAt lastUsedAt expiresAt revokedAt revokedBy active revokeRefusal
    sso { issuer subject groups }
  }
`);

export const IdentitiesQuery = graphql(`
  query Identities {
    identities { ...IdentityRow }
  }
`);

export const CreateIdentityMutation = graphql(`
  mutation CreateIdentity($input: CreateIdentityInput!) {
    createIdentity(input: $input) { plan { ...PlanFields } token identity { ...IdentityRow } }
  }
`);

export const RevokeIdentityMutation = graphql(`
  mutation RevokeIdentity($input: RevokeIdentityInput!) {
    revokeIdentity(input: $input) { plan { ...PlanFields } identity { ...IdentityRow } }
  }
`);
