// Package browser holds the console's journeys in real Chromium, driven by
// playwright-go over "console demo" run in the test process
// (scripts/playwright-setup.sh prepares the browser and the driver).
package browser
