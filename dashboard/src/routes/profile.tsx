import { useState } from 'react';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { api, call, type User } from '../api/client';
import { Spinner } from '../components/badges';
import { Facts } from '../components/facts';
import { toasts } from '../components/toasts';
import { formatTime } from '../format';
import { useTitle } from '../components/use-title';

const USER_KEY = ['user'];

type Preference = User['notification_preference'];

export function ProfilePage() {
  useTitle('Profile');
  const client = useQueryClient();
  const user = useQuery({ queryKey: USER_KEY, queryFn: () => call(api.GET('/users')) });
  // The radio follows the choice at once: the mutation's own state reaches the
  // page a tick later, and a controlled radio would snap back meanwhile.
  const [chosen, setChosen] = useState<Preference | undefined>();
  const save = useMutation({
    mutationFn: (notification_preference: Preference) => call(api.PUT('/users', { body: { notification_preference } })),
    onError: () => setChosen(undefined),
    onSuccess: async (_saved, notification_preference) => {
      client.setQueryData<User>(USER_KEY, (old) => old && { ...old, notification_preference });
      toasts.push('success', 'Notification preference saved.');
      await client.invalidateQueries({ queryKey: USER_KEY });
      await client.invalidateQueries({ queryKey: ['notifications'] });
    },
  });
  if (user.isPending) return <Spinner />;
  if (user.isError && !user.data) return <p className="error-text">{user.error.message}</p>;
  const u = user.data;
  const current = chosen ?? u.notification_preference;
  return (
    <div>
      <h1>Profile</h1>
      <Facts
        items={[
          ['Email', u.email],
          ['Member since', formatTime(u.created_at)],
        ]}
      />
      <form className="card form" onSubmit={(e) => e.preventDefault()}>
        <fieldset>
          <legend>Notifications</legend>
          {(
            [
              ['ALL', 'All notifications', 'Builds, finished and failed jobs, terminated workflows.'],
              ['NONE', 'None', 'Nothing shows in the notifications drawer.'],
            ] as const
          ).map(([value, label, hint]) => (
            <div className="field field-check" key={value}>
              <input
                type="radio"
                id={`pref-${value}`}
                name="notification_preference"
                value={value}
                checked={current === value}
                disabled={save.isPending}
                aria-describedby={`pref-${value}-hint`}
                onChange={() => {
                  setChosen(value);
                  save.mutate(value);
                }}
              />
              <label htmlFor={`pref-${value}`}>{label}</label>
              <p className="hint" id={`pref-${value}-hint`}>
                {hint}
              </p>
            </div>
          ))}
        </fieldset>
      </form>
    </div>
  );
}
