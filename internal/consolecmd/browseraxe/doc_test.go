// Package browseraxe checks every page of the console in real Chromium
// with axe-core and for overflow, on a phone and a desktop, in both themes
// (scripts/playwright-setup.sh prepares the browser).
package browseraxe
