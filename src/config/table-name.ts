/**
 * Table names that do not come from the definition's text: a `{topic}` template filled
 * in with a topic's name, or what a `route` function returns per record. Every such name
 * becomes a directory under `<dataDir>/staging/` and a table under `lance.uri`, so one
 * check guards both: only what Lance accepts in a table name, nothing that reads as a
 * path (no separator, no `..`, no leading `.`), bounded in length.
 */

/** The placeholder a `table` template fills with the record's topic. */
export const TOPIC_PLACEHOLDER = '{topic}';

export const MAX_TABLE_NAME_LENGTH = 128;

const TABLE_NAME_CHARACTERS = /^[A-Za-z0-9_.-]+$/;
const FIRST_CHARACTER = /^[A-Za-z0-9_]/;

/** Why `name` cannot name a table, or undefined when it can. */
export function tableNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'is empty';
  if (name.length > MAX_TABLE_NAME_LENGTH)
    return `is ${name.length} characters long (at most ${MAX_TABLE_NAME_LENGTH})`;
  if (!TABLE_NAME_CHARACTERS.test(name)) return 'may hold only letters, digits, "_", "." and "-"';
  if (!FIRST_CHARACTER.test(name)) return 'must start with a letter, a digit or "_"';
  if (name.includes('..')) return 'must not hold ".."';
  return undefined;
}

/** Whether a `table` value is a template (holds `{topic}`) rather than one table's name. */
export function isTableTemplate(table: string): boolean {
  return table.includes(TOPIC_PLACEHOLDER);
}

/**
 * A topic name as it goes into a template. Kafka allows exactly `[A-Za-z0-9._-]` in topic
 * names, all of which a table name takes, so the name goes in as it is, except a leading
 * `.` or `-` (a hidden directory, an option-like name) which becomes `_`.
 */
export function topicForTableName(topic: string): string {
  return topic.startsWith('.') || topic.startsWith('-') ? `_${topic.slice(1)}` : topic;
}

/** The table a template names for `topic` (every `{topic}` filled in); check it with tableNameProblem. */
export function tableFromTemplate(template: string, topic: string): string {
  return template.split(TOPIC_PLACEHOLDER).join(topicForTableName(topic));
}

/**
 * Why a `table` template cannot name tables, or undefined when it can: outside its
 * placeholders it takes the characters of a table name, and filled with a one-letter
 * topic it names a valid table (so only a topic's own name can make it invalid).
 */
export function tableTemplateProblem(template: string): string | undefined {
  const rest = template.split(TOPIC_PLACEHOLDER).join('');
  if (rest.includes('{') || rest.includes('}')) return `the only placeholder is ${TOPIC_PLACEHOLDER}`;
  const problem = tableNameProblem(tableFromTemplate(template, 't'));
  return problem === undefined ? undefined : `filled with a topic's name, the table name ${problem}`;
}
