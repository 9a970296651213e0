/** `1 fragment`, `2 fragments`: counts in the CLI's reports read as sentences. */
export const plural = (count: number, noun: string): string => `${count} ${noun}${count === 1 ? '' : 's'}`;
