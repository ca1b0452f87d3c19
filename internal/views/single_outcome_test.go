package views

import (
	"context"
	"strings"
	"testing"
)

// A confirmation with one possible outcome states it instead of offering
// a radio group of one option.
func TestConfirmWithOneOutcomeHasNoRadioGroup(t *testing.T) {
	for _, notHappened := range []bool{false, true} {
		var b strings.Builder
		a := OperationActionForm{Name: "confirm", Title: "Confirm it happened — a step of operation op-1", URL: "/operations/op-1/confirm", Outcomes: true, NotHappened: notHappened}
		if err := operationActionForm(OperationDecisionsVM{}, a).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		radios := strings.Count(b.String(), `type="radio"`)
		if want := map[bool]int{false: 0, true: 2}[notHappened]; radios != want {
			t.Errorf("not happened possible %v: %d radio buttons, want %d", notHappened, radios, want)
		}
		if !notHappened && !strings.Contains(b.String(), `<input type="hidden" name="outcome" value="happened">`) {
			t.Errorf("the one outcome is not sent: %s", b.String())
		}
		if strings.Contains(b.String(), "op-1<") {
			t.Errorf("the visible button text repeats the operation's ID: %s", b.String())
		}
	}
}
