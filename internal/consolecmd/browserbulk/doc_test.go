// Package browserbulk drives the console's bulk journeys in real Chromium:
// a bulk request frozen, approved and run, its canary and automatic pause,
// a run cancelled in its middle, a bulk redrive
// (scripts/playwright-setup.sh prepares the browser).
package browserbulk
