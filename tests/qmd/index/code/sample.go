package queue

import (
	"errors"
	"sync"
)

type Queue struct {
	mu    sync.Mutex
	items []string
}

type Sink interface {
	Put(item string) error
}

func New() *Queue {
	q := &Queue{}

	return q
}

func (q *Queue) Push(item string) {
	q.mu.Lock()

	defer q.mu.Unlock()
	q.items = append(q.items, item)
}

func (q *Queue) Pop() (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()

	if len(q.items) == 0 {
		return "", errors.New("empty")
	}

	item := q.items[0]
	q.items = q.items[1:]
	return item, nil
}
