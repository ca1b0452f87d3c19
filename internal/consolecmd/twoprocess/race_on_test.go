//go:build race

package twoprocess

// raceEnabled says that this test binary is built with -race, so that a
// binary a test builds is built with it too.
const raceEnabled = true
