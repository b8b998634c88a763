package tagconsistency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/scribe-es/scribe/actors"
	"github.com/scribe-es/scribe/journal"
	"github.com/scribe-es/scribe/journal/memory"
	"github.com/scribe-es/scribe/tagconsistency"
)

// seatState is what the Enrol decision needs: the course's capacity, how many
// students it has, and whether this student is one of them.
type seatState struct {
	Capacity, Enrolled int
	Defined, Already   bool
}

var errFull = errors.New("course is full")

// enrolCommand enrols student in course, within the course's seat limit. Its
// query spans two tags: the course's and the student's.
func enrolCommand(student, course string) tagconsistency.Command[seatState] {
	courseTag, studentTag := journal.NewTag("course", course), journal.NewTag("student", student)
	return tagconsistency.Command[seatState]{
		Name: "Enrol",
		Query: journal.Query{Items: []journal.QueryItem{
			{Types: []string{"CourseDefined", "StudentEnrolled"}, Tags: []journal.Tag{courseTag}},
			{Types: []string{"StudentEnrolled"}, Tags: []journal.Tag{studentTag}},
		}},
		Evolve: func(s seatState, r journal.Record) seatState {
			switch r.Type {
			case "CourseDefined":
				var d struct{ Capacity int }
				_ = json.Unmarshal(r.Data, &d)
				s.Defined, s.Capacity = true, d.Capacity
			case "StudentEnrolled":
				if r.HasTag(courseTag) {
					s.Enrolled++
					s.Already = s.Already || r.HasTag(studentTag)
				}
			}
			return s
		},
		Decide: func(s seatState) ([]journal.Event, error) {
			switch {
			case !s.Defined:
				return nil, fmt.Errorf("course %s does not exist", course)
			case s.Already:
				return nil, nil // enrolled already: nothing to do
			case s.Enrolled >= s.Capacity:
				return nil, fmt.Errorf("enrol %s in %s: %w", student, course, errFull)
			}
			return []journal.Event{{
				Type: "StudentEnrolled",
				Tags: []journal.Tag{courseTag, studentTag},
				Data: json.RawMessage(`{}`),
			}}, nil
		},
	}
}

// exampleDefineCourse creates a course with a capacity, once.
func exampleDefineCourse(course string, capacity int) tagconsistency.Command[bool] {
	tag := journal.NewTag("course", course)
	return tagconsistency.Command[bool]{
		Name:   "DefineCourse",
		Query:  journal.Query{Items: []journal.QueryItem{{Types: []string{"CourseDefined"}, Tags: []journal.Tag{tag}}}},
		Evolve: func(bool, journal.Record) bool { return true },
		Decide: func(defined bool) ([]journal.Event, error) {
			if defined {
				return nil, nil
			}
			data, _ := json.Marshal(map[string]int{"Capacity": capacity})
			return []journal.Event{{Type: "CourseDefined", Tags: []journal.Tag{tag}, Data: data}}, nil
		},
	}
}

// A course with two seats: the third student is refused, at the first
// attempt and without any retry loop, because the course's and the students'
// stream actors serialize every command that touches their tags.
func Example() {
	ctx := context.Background()
	j := memory.New()
	host, err := actors.NewHost(ctx, actors.Config{
		Journal:  j,
		Sessions: j,
		NodeID:   "example",
		// No aggregates: the tags' actors only keep versions and serve reservations.
		Resolve: func(string) actors.Model { return nil },
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = host.Shutdown(ctx) }()

	x, err := tagconsistency.New(tagconsistency.Config{Journal: j, Owners: host})
	if err != nil {
		panic(err)
	}
	if _, err := tagconsistency.Execute(ctx, x, exampleDefineCourse("go101", 2), tagconsistency.Options{}); err != nil {
		panic(err)
	}
	for _, student := range []string{"ada", "grace", "linus"} {
		res, err := tagconsistency.Execute(ctx, x, enrolCommand(student, "go101"), tagconsistency.Options{})
		if err != nil {
			fmt.Println("refused:", err)
			continue
		}
		r := res.Records[0]
		fmt.Printf("enrolled %s: seat %d of course:go101\n", student, r.Version("course:go101")-1)
	}
	// Output:
	// enrolled ada: seat 1 of course:go101
	// enrolled grace: seat 2 of course:go101
	// refused: enrol linus in go101: course is full
}
