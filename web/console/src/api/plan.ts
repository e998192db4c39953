// Plans: every change's answer carries the plan of its dry run (lib/plan.ts reads it).
// GraphQL Code Generator (codegen.yml) types these documents from schema/*.graphqls into
// src/gql/.
import { graphql } from '../gql';

export const PlanFieldsFragment = graphql(`
  fragment PlanFields on Plan {
    refused
    planHash
    facts { name value }
    calls { system request target changes { field before after } }
    refusals { code message field }
    warnings { code message }
  }
`);
