package tagconsistency_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/tagconsistency"
)

// The domains the tests run: a course seat limit, unique usernames and money
// transfers between accounts.

var (
	errNoCourse        = errors.New("course does not exist")
	errCourseFull      = errors.New("course is full")
	errAlreadyEnrolled = errors.New("student already enrolled")
	errNameTaken       = errors.New("username is taken")
	errInsufficient    = errors.New("insufficient funds")
	errNoAccount       = errors.New("account is not open")
)

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func courseTag(c string) journal.Tag  { return journal.NewTag("course", c) }
func studentTag(s string) journal.Tag { return journal.NewTag("student", s) }

type courseDefined struct {
	Course   string `json:"course"`
	Capacity int    `json:"capacity"`
}

type studentEnrolled struct {
	Course  string `json:"course"`
	Student string `json:"student"`
}

func defineCourseEvent(course string, capacity int) journal.Event {
	return journal.Event{Type: "CourseDefined", Tags: []journal.Tag{courseTag(course)}, Data: mustJSON(courseDefined{course, capacity})}
}

type enrolState struct {
	defined  bool
	capacity int
	enrolled int
	already  bool
}

// enrol enrols student into course if the course exists, has a free seat and
// the student is not enrolled yet.
func enrol(student, course string) tagconsistency.Command[enrolState] {
	return tagconsistency.Command[enrolState]{
		Name: "Enrol",
		Query: journal.Query{Items: []journal.QueryItem{
			{Types: []string{"CourseDefined", "StudentEnrolled"}, Tags: []journal.Tag{courseTag(course)}},
			{Types: []string{"StudentEnrolled"}, Tags: []journal.Tag{studentTag(student)}},
		}},
		Evolve: func(s enrolState, r journal.Record) enrolState {
			switch r.Type {
			case "CourseDefined":
				var d courseDefined
				mustUnmarshal(r.Data, &d)
				s.defined, s.capacity = true, d.Capacity
			case "StudentEnrolled":
				var e studentEnrolled
				mustUnmarshal(r.Data, &e)
				if e.Course == course {
					s.enrolled++
					if e.Student == student {
						s.already = true
					}
				}
			}
			return s
		},
		Decide: func(s enrolState) ([]journal.Event, error) {
			switch {
			case !s.defined:
				return nil, fmt.Errorf("enrol %s in %s: %w", student, course, errNoCourse)
			case s.already:
				return nil, fmt.Errorf("enrol %s in %s: %w", student, course, errAlreadyEnrolled)
			case s.enrolled >= s.capacity:
				return nil, fmt.Errorf("enrol %s in %s: %w", student, course, errCourseFull)
			}
			return []journal.Event{{
				Type: "StudentEnrolled",
				Tags: []journal.Tag{courseTag(course), studentTag(student)},
				Data: mustJSON(studentEnrolled{course, student}),
			}}, nil
		},
	}
}

func mustUnmarshal(b []byte, v any) {
	if err := json.Unmarshal(b, v); err != nil {
		panic(err)
	}
}

type usernameClaimed struct {
	Name string `json:"name"`
	User string `json:"user"`
}

// claimUsername claims name for user unless someone already holds it.
func claimUsername(user, name string) tagconsistency.Command[bool] {
	return tagconsistency.Command[bool]{
		Name:  "ClaimUsername",
		Query: journal.Query{Items: []journal.QueryItem{{Types: []string{"UsernameClaimed"}, Tags: []journal.Tag{journal.NewTag("username", name)}}}},
		Tags:  []journal.Tag{journal.NewTag("user", user)},
		Evolve: func(bool, journal.Record) bool {
			return true
		},
		Decide: func(taken bool) ([]journal.Event, error) {
			if taken {
				return nil, fmt.Errorf("claim %q for %s: %w", name, user, errNameTaken)
			}
			return []journal.Event{{
				Type: "UsernameClaimed",
				Tags: []journal.Tag{journal.NewTag("username", name), journal.NewTag("user", user)},
				Data: mustJSON(usernameClaimed{name, user}),
			}}, nil
		},
	}
}

func accountTag(i int) journal.Tag { return journal.NewTag("account", fmt.Sprint(i)) }

type moneyMoved struct {
	Account journal.Tag `json:"account,omitempty"`
	From    journal.Tag `json:"from,omitempty"`
	To      journal.Tag `json:"to,omitempty"`
	Amount  int64       `json:"amount"`
}

// applyMoney folds one event into the balances it touches; opened records the
// accounts that received a deposit.
func applyMoney(bal map[journal.Tag]int64, opened map[journal.Tag]bool, r journal.Record) {
	var m moneyMoved
	mustUnmarshal(r.Data, &m)
	switch r.Type {
	case "Deposited":
		bal[m.Account] += m.Amount
		opened[m.Account] = true
	case "Withdrawn":
		bal[m.Account] -= m.Amount
	case "Transferred":
		bal[m.From] -= m.Amount
		bal[m.To] += m.Amount
	}
}

type transferState struct {
	bal    map[journal.Tag]int64
	opened map[journal.Tag]bool
}

// transfer moves amount from one account to another if both are open and the
// source can cover it.
func transfer(from, to journal.Tag, amount int64) tagconsistency.Command[transferState] {
	return tagconsistency.Command[transferState]{
		Name:  "Transfer",
		Query: journal.Query{Items: []journal.QueryItem{{Tags: []journal.Tag{from}}, {Tags: []journal.Tag{to}}}},
		Initial: func() transferState {
			return transferState{bal: map[journal.Tag]int64{}, opened: map[journal.Tag]bool{}}
		},
		Evolve: func(s transferState, r journal.Record) transferState {
			applyMoney(s.bal, s.opened, r)
			return s
		},
		Decide: func(s transferState) ([]journal.Event, error) {
			if !s.opened[from] || !s.opened[to] {
				return nil, fmt.Errorf("transfer %s→%s: %w", from, to, errNoAccount)
			}
			if s.bal[from] < amount {
				return nil, fmt.Errorf("transfer %d from %s (balance %d): %w", amount, from, s.bal[from], errInsufficient)
			}
			return []journal.Event{{
				Type: "Transferred",
				Tags: []journal.Tag{from, to},
				Data: mustJSON(moneyMoved{From: from, To: to, Amount: amount}),
			}}, nil
		},
	}
}

// balanceOf folds a stream's records into the account's balance.
func balanceOf(account journal.Tag, recs []journal.Record) int64 {
	bal, opened := map[journal.Tag]int64{}, map[journal.Tag]bool{}
	for _, r := range recs {
		applyMoney(bal, opened, r)
	}
	return bal[account]
}

func depositEvent(account journal.Tag, amount int64) journal.Event {
	return journal.Event{Type: "Deposited", Tags: []journal.Tag{account}, Data: mustJSON(moneyMoved{Account: account, Amount: amount})}
}

func withdrawEvent(account journal.Tag, amount int64) journal.Event {
	return journal.Event{Type: "Withdrawn", Tags: []journal.Tag{account}, Data: mustJSON(moneyMoved{Account: account, Amount: amount})}
}
