import type { QualifyStep } from '../step';
import { step as brokerOutage } from './broker-outage';
import { step as killCampaign } from './kill-campaign';
import { step as s3Outage } from './s3-outage';

/** The qualification steps in the order `npm run qualify` runs them (the lead adds the others' here). */
export const STEPS: readonly QualifyStep[] = [killCampaign, brokerOutage, s3Outage];
