import { errorMessage } from '../common/errors';
import { isTableTemplate, tableFromTemplate, tableNameProblem } from './table-name';

/**
 * Which table a record goes to: one table for everything (`table: 'orders'`, today's
 * layout), a table per topic (`table: 'cdc_{topic}'`), or what the definition's `route`
 * function returns per record (its `table` the default when it returns nothing).
 */
export type TableRouting =
  | { readonly kind: 'fixed'; readonly table: string }
  | { readonly kind: 'template'; readonly template: string }
  | { readonly kind: 'route' };

/** A record as a `route` function sees it: before decoding, its bytes as they are. */
export interface RouteRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  /** Kafka timestamp, epoch milliseconds. */
  readonly timestamp: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

/** A definition's `route`: the table of one record; undefined or null for the definition's `table`. */
export type Route = (record: RouteRecord) => string | null | undefined;

/** The routing a definition asks for: `route` wins, then a `{topic}` template, else one fixed table. */
export function tableRoutingOf(table: string, route: Route | undefined): TableRouting {
  if (route) return { kind: 'route' };
  if (isTableTemplate(table)) return { kind: 'template', template: table };
  return { kind: 'fixed', table };
}

/** Where one record goes: a valid table, or why it has none (its dead letter's detail). */
export type TableChoice = { readonly table: string } | { readonly problem: string };

/**
 * Names the table of each record. A topic's table under a template is computed once per
 * topic; a route runs once per record. Every name that does not come from the
 * definition's text is checked (tableNameProblem): a name that escapes the staging
 * directory or `lance.uri` never reaches the file system.
 */
export class TableResolver {
  readonly #byTopic = new Map<string, TableChoice>();

  constructor(
    readonly routing: TableRouting,
    /** The definition's `table` (a name or a template): a route's default. */
    private readonly defaultTable: string,
    private readonly route?: Route,
  ) {}

  /** The table of every record of `topic`, when the routing does not look at records. */
  tableOfTopic(topic: string): TableChoice | undefined {
    if (this.routing.kind === 'fixed') return { table: this.routing.table };
    if (this.routing.kind === 'route') return undefined;
    return this.#templated(this.routing.template, topic);
  }

  /** The table of one record; a route that throws or returns an invalid name is a problem, not an error. */
  tableOf(record: RouteRecord): TableChoice {
    const byTopic = this.tableOfTopic(record.topic);
    if (byTopic) return byTopic;
    let named: unknown;
    try {
      named = this.route!(record);
    } catch (error) {
      return { problem: `the route function threw: ${errorMessage(error)}` };
    }
    if (named === undefined || named === null) {
      return isTableTemplate(this.defaultTable)
        ? this.#templated(this.defaultTable, record.topic)
        : { table: this.defaultTable };
    }
    if (typeof named !== 'string')
      return { problem: `the route function returned a ${typeof named}, not a name` };
    const problem = tableNameProblem(named);
    return problem === undefined ? { table: named } : { problem: `table name ${quoted(named)} ${problem}` };
  }

  #templated(template: string, topic: string): TableChoice {
    let choice = this.#byTopic.get(topic);
    if (!choice) {
      const name = tableFromTemplate(template, topic);
      const problem = tableNameProblem(name);
      choice = problem === undefined ? { table: name } : { problem: `table name ${quoted(name)} ${problem}` };
      this.#byTopic.set(topic, choice);
    }
    return choice;
  }
}

/** A name in a message, cut to a readable length (a route may return anything). */
function quoted(name: string): string {
  return JSON.stringify(name.length > 160 ? `${name.slice(0, 160)}…` : name);
}
