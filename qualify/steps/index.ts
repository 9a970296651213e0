import type { QualifyStep } from '../step';
import { step as brokerOutage } from './broker-outage';
import { step as codecs } from './codecs';
import { step as cdc } from './cdc';
import { step as compacted } from './compacted';
import { step as dataDirLoss } from './data-dir-loss';
import { step as fullDisk } from './full-disk';
import { step as fuzz } from './fuzz';
import { step as hostileInput } from './hostile-input';
import { step as killCampaign } from './kill-campaign';
import { ddbStep as objectStoreKillsDdb, step as objectStoreKills } from './object-store-kills';
import { step as recreated } from './recreated';
import { step as retention } from './retention';
import { step as routing } from './routing';
import { step as scaleDown } from './scale-down';
import { step as schemaRegistry } from './schema-registry';
import { step as s3Outage } from './s3-outage';
import { step as transactional } from './transactional';

/** The qualification steps in the order `npm run qualify` runs them. */
export const STEPS: readonly QualifyStep[] = [
  killCampaign,
  brokerOutage,
  s3Outage,
  objectStoreKills,
  objectStoreKillsDdb,
  dataDirLoss,
  fullDisk,
  fuzz,
  compacted,
  codecs,
  transactional,
  retention,
  recreated,
  scaleDown,
  schemaRegistry,
  hostileInput,
  cdc,
  routing,
];
